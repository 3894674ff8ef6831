"""The status's time window: how long it is, how much of it is kept, and the figures read from it on the
counters' clock. A figure from before a quiet spell is no figure now. Only the snapshot reads here; the
recorder (``core.statistics``) alone writes what it reads, under its lock, so a warm recall never runs this.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

LATENCY_WINDOW: Final = 2048  # the newest reranks (and queue waits) kept for the percentiles, of which ...
LATENCY_WINDOW_S: Final = 300.0  # ... those of the last 5 minutes count: after a quiet spell, none (not stale ones)
# Each server's answers are kept on their own (a busy replica must not push a quiet one's recent answer out of
# its row): its newest ANSWERS_PER_SERVER, of SERVERS_KEPT servers at most (the least recently answered goes).
ANSWERS_PER_SERVER: Final = 256
SERVERS_KEPT: Final = 64


def recent(samples: Iterable[tuple[float, float]], since: float) -> list[float]:
    """The samples of the window (after ``since``), sorted: a figure from before a quiet spell is no figure now."""
    return sorted(value for at, value in samples if at > since)


def answer_figures(answers: Iterable[tuple[float, float, int]], since: float) -> tuple[float | None, float | None]:
    """Milliseconds per request and per pair over one server's answers (when, seconds, pairs) after ``since``;
    None, None when it answered none in it."""
    mine = [(seconds, pairs) for at, seconds, pairs in answers if at > since]
    if not mine:
        return None, None
    spent = 1000 * sum(seconds for seconds, _ in mine)
    return spent / len(mine), spent / sum(pairs for _, pairs in mine)
