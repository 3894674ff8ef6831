"""The detailed parts of a statistics snapshot: what the reranker had to choose from (the recall
pools), and how each replica is doing. Plain frozen data, like the rest of the snapshot; the JSON form
of any of them is ``json_ready(dataclasses.asdict(...))``."""

from __future__ import annotations

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
