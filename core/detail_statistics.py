"""The detailed parts of a statistics snapshot: what the reranker had to choose from (the recall
pools), the load of the last minute, and how each replica is doing. Plain frozen data, like the rest
of the snapshot; the JSON form of any of them is ``json_ready(dataclasses.asdict(...))``.

``RecentRates`` counts, per second over the last minute, the recalls the agents asked for, those
reranked (the goodput) and those shed, so the status can say whether and by how much the server is
overloaded now, not on average since the process started. Counts are kept in one-second buckets; not
thread-safe (the statistics recorder holds its lock around it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Final

_DIGITS: Final = {"share": 3, "ms_per_pair": 3}  # small fractions keep one more digit; the rest two


def json_ready(value: Any, key: str = "") -> Any:
    """``value`` (a dict from ``asdict``) with its floats rounded for the status panel and the CLI."""
    if isinstance(value, dict):
        return {k: json_ready(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v, key) for v in value]
    if isinstance(value, float):
        return round(value, _DIGITS.get(key, 2))
    return value


@dataclass(frozen=True)
class PoolStatistics:
    """What the reranker had to choose from: one entry per recall whose pool it was given."""

    recalls: int = 0
    mean_size: float | None = None
    starved_fraction: float | None = None  # pool no larger than what the recall returns: nothing to choose
    rescued: int = 0  # memories returned that stock's result did not contain
    floor_dropped: int = 0  # memories the recall would have returned, left out by rerank_min_score

    def as_dict(self) -> dict[str, Any]:
        return json_ready(asdict(self))


@dataclass(frozen=True)
class LoadStatistics:
    """The last minute: recalls asked for, reranked (the goodput) and shed, a second; and how long
    recalls waited in the queue before their request went out (over the recent ones)."""

    offered_per_s: float = 0.0
    goodput_per_s: float = 0.0
    shed_per_s: float = 0.0
    queue_wait_p50_ms: float | None = None
    queue_wait_p95_ms: float | None = None

    @property
    def overloaded(self) -> bool:
        return self.shed_per_s > 0


@dataclass(frozen=True)
class ReplicaStatistics:
    """One server of ``rerank_endpoint`` as the balancer sees it."""

    url: str
    breaker: str  # closed, open, half_open
    pairs: int  # pairs sent to it
    share: float  # of all pairs sent
    in_flight: int
    latency_ms: float | None  # per request, exponentially weighted
    ms_per_pair: float | None

    def as_dict(self) -> dict[str, Any]:
        return json_ready(asdict(self))


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
