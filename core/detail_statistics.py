"""The detailed parts of a statistics snapshot: what the reranker had to choose from (the recall
pools), and how each replica is doing. Plain frozen data, like the rest of the snapshot."""

from __future__ import annotations

from dataclasses import dataclass


def rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True)
class PoolStatistics:
    """What the reranker had to choose from: one entry per recall whose pool it was given."""

    recalls: int = 0
    mean_size: float | None = None
    starved_fraction: float | None = None  # pool no larger than what the recall returns: nothing to choose
    rescued: int = 0  # memories returned that stock's result did not contain
    floor_dropped: int = 0  # memories the recall would have returned, left out by rerank_min_score

    def as_dict(self) -> dict[str, object]:
        return {
            "recalls": self.recalls,
            "mean_size": rounded(self.mean_size),
            "starved_fraction": rounded(self.starved_fraction),
            "rescued": self.rescued,
            "floor_dropped": self.floor_dropped,
        }



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

    def as_dict(self) -> dict[str, object]:
        return {"url": self.url, "breaker": self.breaker, "pairs": self.pairs, "share": rounded(self.share, 3),
                "in_flight": self.in_flight, "latency_ms": rounded(self.latency_ms),
                "ms_per_pair": rounded(self.ms_per_pair, 3)}
