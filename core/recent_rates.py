"""Events per second over the last minute: the recalls the agents asked for, those reranked (the
goodput) and those shed, so the status can say whether and by how much the server is overloaded now,
not on average since the process started. Counts are kept in one-second buckets; not thread-safe (the
statistics recorder holds its lock around it)."""

from __future__ import annotations

from collections import deque
from typing import Final

KINDS: Final = ("offered", "reranked", "shed")
WINDOW_S: Final = 60


class RecentRates:
    def __init__(self, window_s: int = WINDOW_S) -> None:
        self._window_s = window_s
        self._buckets: deque[list[int]] = deque()  # [second, offered, reranked, shed], oldest first

    def add(self, kind: str, now: float) -> None:
        second = int(now)
        self._forget_before(second - self._window_s + 1)
        if not self._buckets or self._buckets[-1][0] != second:
            self._buckets.append([second, 0, 0, 0])
        self._buckets[-1][1 + KINDS.index(kind)] += 1

    def per_second(self, now: float) -> dict[str, float]:
        """Each kind's rate over the window, or over the time since the oldest count kept if shorter."""
        self._forget_before(int(now) - self._window_s + 1)
        if not self._buckets:
            return dict.fromkeys(KINDS, 0.0)
        span = min(float(self._window_s), max(1.0, now - self._buckets[0][0]))
        return {kind: sum(b[1 + i] for b in self._buckets) / span for i, kind in enumerate(KINDS)}

    def _forget_before(self, second: int) -> None:
        while self._buckets and self._buckets[0][0] < second:
            self._buckets.popleft()
