"""Counters for status: one thread-safe recorder, read as a frozen snapshot.

Each thing is counted where it happens: a rerank's outcome by its caller, the one that returns it
(``service.runtime``), so the counters agree with what callers got; a request's events by the dispatch
step on the owner loop, where requests are made (the recorder is its ``DispatchEvents``); a pool and
its shadow comparison by the recall path. Writers are on several threads, so every write takes the
lock. The UI, the status tool and the CLI all read ``snapshot()`` and nothing else.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from . import deadline as clock
from .detail_statistics import LoadStatistics, PoolStatistics, RecentRates, ReplicaStatistics, json_ready
from .errors import Overloaded, QueueFull

LATENCY_WINDOW: Final = 2048  # recent reranks (and queue waits) kept for the percentiles
SHED_REASONS: Final = frozenset({Overloaded.reason, QueueFull.reason})  # recalls turned away at once


@dataclass(frozen=True)
class RerankerStatistics:
    """A consistent snapshot of every counter (``fallbacks`` maps a reason to its count)."""

    reranks: int = 0
    reranked: int = 0
    http_requests: int = 0
    pairs_scored: int = 0
    fallbacks: Mapping[str, int] = field(default_factory=dict)
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    breakers: Mapping[str, str] = field(default_factory=dict)
    replicas: tuple[ReplicaStatistics, ...] = ()
    queued_pairs: int = 0
    in_flight: int = 0
    shadow_recalls: int = 0
    shadow_mean_kept_fraction: float | None = None
    shadow_mean_displacement: float | None = None
    last_api: str = ""
    last_error: str = ""
    cancelled: int = 0
    retries: int = 0
    stale_connection_retries: int = 0
    rate_limit_waits: int = 0
    hedges: int = 0
    retry_budget_exhausted: int = 0
    reranked_after_retry: int = 0
    failovers: int = 0
    detections: int = 0  # routes detected (a few GETs and a probe each), cache hits aside
    pool: PoolStatistics = field(default_factory=PoolStatistics)
    load: LoadStatistics = field(default_factory=LoadStatistics)

    @property
    def mean_pairs_per_request(self) -> float | None:
        return self.pairs_scored / self.http_requests if self.http_requests else None

    @property
    def fallback_total(self) -> int:
        return sum(self.fallbacks.values())

    @property
    def shed(self) -> int:
        """Recalls turned away at once because the servers were busy past their deadline or the queue full."""
        return sum(count for reason, count in self.fallbacks.items() if reason in SHED_REASONS)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for the API handlers and the CLI: every field, and the derived figures."""
        data = asdict(self) | {"mean_pairs_per_request": self.mean_pairs_per_request,
                               "fallback_total": self.fallback_total, "shed": self.shed}
        return json_ready(data)


class StatsRecorder:
    """Mutable counters behind a lock; ``snapshot`` copies them out."""

    def __init__(self, clock: Callable[[], float] = clock.now) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._reranks = 0
            self._reranked = 0
            self._requests = 0
            self._pairs = 0
            self._fallbacks: Counter[str] = Counter()
            self._latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
            self._shadow = 0
            self._shadow_kept = 0.0
            self._shadow_displacement = 0.0
            self._last_api = ""
            self._last_error = ""
            self._events: Counter[str] = Counter()
            self._pools = 0
            self._pool_members = 0
            self._starved = 0
            self._rescued = 0
            self._floor_dropped = 0
            self._rates = RecentRates()
            self._queue_waits: deque[float] = deque(maxlen=LATENCY_WINDOW)

    # --- reranks: counted by their caller, the one that returns the outcome (any thread) ----------

    def rerank_started(self) -> None:
        with self._lock:
            self._reranks += 1
            self._rates.add("offered", self._clock())

    def reranked(self, latency_s: float, api: str, *, retried: bool = False) -> None:
        with self._lock:
            self._reranked += 1
            self._rates.add("reranked", self._clock())
            self._latencies.append(latency_s * 1000.0)
            self._last_api = api
            if retried:
                self._events["reranked_after_retry"] += 1

    def fell_back(self, reason: str, message: str = "") -> None:
        """A call kept its stock order, for ``reason`` (``message`` is already masked)."""
        with self._lock:
            self._fallbacks[reason] += 1
            if reason in SHED_REASONS:
                self._rates.add("shed", self._clock())
            if message:
                self._last_error = message

    def rerank_cancelled(self) -> None:
        """The caller went away (cancelled) before the rerank finished: neither reranked nor a fallback."""
        self._count("cancelled")

    # --- requests: counted by the dispatch step where they are made (the owner loop) ------------

    def on_request(self, pairs: int) -> None:
        with self._lock:
            self._requests += 1
            self._pairs += pairs

    def on_retry(self, kind: str) -> None:
        """A request was sent again after an error or a 429 (``kind``: backoff or retry_after)."""
        self._count("retries")

    def on_stale_resend(self) -> None:
        """The transport sent a request again on a fresh connection (any request: scoring or detection)."""
        self._count("stale_connection_retries")

    def on_rate_limit_wait(self) -> None:
        self._count("rate_limit_waits")

    def on_hedge(self) -> None:
        self._count("hedges")

    def on_failover(self) -> None:
        """A request went on to another replica after its replica failed or could not take it."""
        self._count("failovers")

    def on_budget_spent(self) -> None:
        self._count("retry_budget_exhausted")

    def on_detection(self) -> None:
        """A route was detected (not found in the cache): a server's identifying GETs and probes ran."""
        self._count("detections")

    def on_queue_wait(self, seconds: float) -> None:
        """A recall waited this long in the queue before the first request carrying it went out."""
        with self._lock:
            self._queue_waits.append(seconds * 1000.0)

    def _count(self, event: str) -> None:
        with self._lock:
            self._events[event] += 1

    # --- recalls: counted by the recall path (A0's threads) --------------------------------------

    def shadow(self, kept_fraction: float, displacement: float) -> None:
        with self._lock:
            self._shadow += 1
            self._shadow_kept += kept_fraction
            self._shadow_displacement += displacement

    def pool(self, size: int, returned: int, rescued: int = 0, floor_dropped: int = 0) -> None:
        """One recall's pool: its ``size``, how many the recall returns, and what reranking changed."""
        with self._lock:
            self._pools += 1
            self._pool_members += size
            self._starved += size <= returned
            self._rescued += rescued
            self._floor_dropped += floor_dropped

    def snapshot(
        self, *, breakers: Mapping[str, str] | None = None, queued_pairs: int = 0, in_flight: int = 0,
        replicas: tuple[ReplicaStatistics, ...] = (),
    ) -> RerankerStatistics:
        with self._lock:
            ordered = sorted(self._latencies)
            return RerankerStatistics(
                reranks=self._reranks,
                reranked=self._reranked,
                http_requests=self._requests,
                pairs_scored=self._pairs,
                fallbacks=dict(self._fallbacks),
                latency_p50_ms=percentile(ordered, 0.50),
                latency_p95_ms=percentile(ordered, 0.95),
                breakers=dict(breakers or {}),
                replicas=replicas,
                queued_pairs=queued_pairs,
                in_flight=in_flight,
                shadow_recalls=self._shadow,
                shadow_mean_kept_fraction=self._shadow_kept / self._shadow if self._shadow else None,
                shadow_mean_displacement=self._shadow_displacement / self._shadow if self._shadow else None,
                last_api=self._last_api,
                last_error=self._last_error,
                **{name: self._events[name] for name in _EVENTS},
                pool=self._pool_snapshot(),
                load=self._load_snapshot(),
            )

    def _load_snapshot(self) -> LoadStatistics:
        """Called with the lock held."""
        rates = self._rates.per_second(self._clock())
        waits = sorted(self._queue_waits)
        return LoadStatistics(offered_per_s=rates["offered"], goodput_per_s=rates["reranked"],
                              shed_per_s=rates["shed"], queue_wait_p50_ms=percentile(waits, 0.50),
                              queue_wait_p95_ms=percentile(waits, 0.95))

    def _pool_snapshot(self) -> PoolStatistics:
        """Called with the lock held."""
        pools = self._pools
        return PoolStatistics(
            recalls=pools,
            mean_size=self._pool_members / pools if pools else None,
            starved_fraction=self._starved / pools if pools else None,
            rescued=self._rescued,
            floor_dropped=self._floor_dropped,
        )


_EVENTS: Final = ("cancelled", "retries", "stale_connection_retries", "rate_limit_waits", "hedges",
                  "retry_budget_exhausted", "reranked_after_retry", "failovers", "detections")


def percentile(ordered: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    if not ordered:
        return None
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]
