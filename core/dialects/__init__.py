"""Wire dialects: build a request for a batch of pairs, parse the answer into one score per pair."""

from .catalog import Dialect, RerankDialect, TeiDialect
from .qwen3_score import Qwen3ScoreDialect
from .wire import ScoreBatch, WireAnswer, WireRequest

__all__ = [
    "Dialect",
    "Qwen3ScoreDialect",
    "RerankDialect",
    "ScoreBatch",
    "TeiDialect",
    "WireAnswer",
    "WireRequest",
]
