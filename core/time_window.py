"""The status's time window: how long it is, how much of it is kept, and the figures read from it on the
counters' clock. A figure from before a quiet spell is no figure now. Only the snapshot reads here; the
recorder (``core.statistics``) alone writes what it reads, under its lock, so a warm recall never runs this.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

LATENCY_WINDOW: Final = 2048  # the newest reranks (and queue waits) kept for the percentiles, of which ...
LATENCY_WINDOW_S: Final = 300.0  # ... those of the last 5 minutes count: after a quiet spell, none (not stale ones)


def recent(samples: Iterable[tuple[float, float]], now: float) -> list[float]:
    """The samples of the last ``LATENCY_WINDOW_S``, sorted: a figure from before a quiet spell is no figure now."""
    return sorted(value for at, value in samples if at > now - LATENCY_WINDOW_S)
