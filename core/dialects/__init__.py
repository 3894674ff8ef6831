"""Wire dialects: build a request for a batch of pairs, parse the answer into one score per pair."""

from .qwen3_score import Qwen3ScoreDialect
from .wire import Dialect, RerankDialect, ScoreBatch, TeiDialect, WireAnswer, WireRequest

__all__ = [
    "Dialect",
    "Qwen3ScoreDialect",
    "RerankDialect",
    "ScoreBatch",
    "TeiDialect",
    "WireAnswer",
    "WireRequest",
]
