"""Wire dialects: build a request for a batch of pairs, parse the answer into one score per pair."""

from .catalog import Dialect
from .wire import ScoreBatch, WireAnswer, WireRequest

__all__ = ["Dialect", "ScoreBatch", "WireAnswer", "WireRequest"]
