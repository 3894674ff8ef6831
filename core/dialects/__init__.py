"""Wire dialects: build a request for a batch of pairs, parse the answer into one score per pair."""

from .wire import Dialect, RerankDialect, ScoreBatch, TeiDialect, WireAnswer, WireRequest

__all__ = ["Dialect", "RerankDialect", "ScoreBatch", "TeiDialect", "WireAnswer", "WireRequest"]
