"""Counters for status: one thread-safe recorder, read as a frozen snapshot. Each thing is counted where it
happens (docs/architecture.md, "Who owns what"), so writers are on several threads and every write takes the
lock; the UI, the status tool and the CLI read ``snapshot()`` alone, whose JSON form rounds the floats.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import partialmethod
from typing import Any, Final

from . import deadline as clock
from .errors import BreakerOpen, Overloaded, QueueFull

LATENCY_WINDOW: Final = 2048  # the newest reranks (and queue waits) kept for the percentiles, of which ...
LATENCY_WINDOW_S: Final = 300.0  # ... those of the last 5 minutes count: after a quiet spell, none (not stale ones)
# Each server's answers are kept on their own (a busy replica must not push a quiet one's recent answer out of
# its row): its newest ANSWERS_PER_SERVER, of SERVERS_KEPT servers at most (the least recently answered goes).
ANSWERS_PER_SERVER: Final = 256
SERVERS_KEPT: Final = 64
SHED_REASONS: Final = frozenset({Overloaded.reason, QueueFull.reason})  # recalls turned away at once
# the snapshot's plain counts, each kept under its field's name
_COUNTS: Final = ("reranks", "reranked", "http_requests", "pairs_scored", "shadow_recalls", "cancelled", "retries",
                  "stale_connection_retries", "rate_limit_waits", "hedges", "retry_budget_exhausted",
                  "reranked_after_retry", "failovers", "detections")
_RATES: Final = ("offered", "reranked", "shed")  # what the status shows a second now


def json_ready(value: Any, key: str = "") -> Any:
    """``value`` (a dict from ``asdict``) with its floats rounded for the status panel and the CLI."""
    if isinstance(value, dict):
        return {k: json_ready(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v, key) for v in value]
    if isinstance(value, float):
        return round(value, 3 if key in ("share", "ms_per_pair") else 2)  # small fractions: a digit more
    return value


@dataclass(frozen=True)
class PoolStatistics:
    """What the reranker had to choose from, over the recalls whose pool it was given."""

    recalls: int = 0
    mean_size: float | None = None
    starved_fraction: float | None = None  # pool no larger than what the recall returns: nothing to choose
    rescued: int = 0  # memories returned that stock's result did not contain
    floor_dropped: int = 0  # memories the recall would have returned, left out by rerank_min_score

    def as_dict(self) -> dict[str, Any]:
        return json_ready(asdict(self))


@dataclass(frozen=True)
class LoadStatistics:
    """Recalls offered, reranked and shed a second over the last minute; queue waits of ``LATENCY_WINDOW_S``."""

    offered_per_s: float = 0.0
    goodput_per_s: float = 0.0
    shed_per_s: float = 0.0
    queue_wait_p50_ms: float | None = None
    queue_wait_p95_ms: float | None = None


@dataclass(frozen=True)
class ReplicaStatistics:
    """One server of ``rerank_endpoint`` as the balancer sees it."""

    url: str
    breaker: str  # closed, open, half_open
    pairs: int  # pairs sent to it
    share: float  # of the pairs sent to the servers listed
    in_flight: int
    latency_ms: float | None = None  # mean per request over ``LATENCY_WINDOW_S``; None: no answer in it ...
    ms_per_pair: float | None = None  # ... (not the balancer's estimate, which outlives a quiet spell)

    def as_dict(self) -> dict[str, Any]:
        return json_ready(asdict(self))


@dataclass(frozen=True)
class RerankerStatistics:
    """A consistent snapshot of every counter."""

    reranks: int = 0
    reranked: int = 0
    http_requests: int = 0
    pairs_scored: int = 0
    fallbacks: Mapping[str, int] = field(default_factory=dict)
    latency_p50_ms: float | None = None  # over the last ``LATENCY_WINDOW_S``; None: no rerank in it
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
    last_error_age_s: float | None = None  # how long ago ``last_error`` happened: an old one is no current problem
    latency_window_s: float = LATENCY_WINDOW_S  # what "recent" is for the latencies: the readers say it, not guess it
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
        return _mean(self.pairs_scored, self.http_requests)

    @property
    def fallback_total(self) -> int:
        return sum(self.fallbacks.values())

    @property
    def shed(self) -> int:
        """Recalls turned away at once because the servers were busy past their deadline or the queue full."""
        return sum(count for reason, count in self.fallbacks.items() if reason in SHED_REASONS)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for the API handlers and the CLI: every field, and the derived figures."""
        return json_ready(asdict(self) | {"mean_pairs_per_request": self.mean_pairs_per_request,
                                          "fallback_total": self.fallback_total, "shed": self.shed})


class StatsRecorder:
    def __init__(self, clock: Callable[[], float] = clock.now, window_s: float = LATENCY_WINDOW_S) -> None:
        self._lock, self._clock, self._window_s = threading.Lock(), clock, window_s
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._counts: Counter[str] = Counter()  # ``_COUNTS`` and the pools' sums
            self._shadow_kept = self._shadow_displacement = 0.0
            self._last_api, self._last_error, self._last_error_at = "", "", 0.0
            self._fallbacks: Counter[str] = Counter()
            self._latencies: deque[tuple[float, float]] = deque(maxlen=LATENCY_WINDOW)  # (when, milliseconds)
            self._queue_waits: deque[tuple[float, float]] = deque(maxlen=LATENCY_WINDOW)
            self._answers: dict[str, deque[tuple[float, float, int]]] = {}  # url: (when, s, pairs), per server
            self._rates = RecentCounts()

    def rerank_started(self) -> None:
        with self._lock:
            self._counts["reranks"] += 1
            self._rates.add("offered", self._clock())

    def reranked(self, latency_s: float, api: str, *, retried: bool = False) -> None:
        with self._lock:
            self._counts.update(reranked=1, reranked_after_retry=int(retried))
            self._rates.add("reranked", self._clock())
            self._latencies.append((self._clock(), latency_s * 1000.0))
            self._last_api = api

    def fell_back(self, reason: str, message: str = "") -> None:
        """A call kept its stock order (``message`` is already masked)."""
        with self._lock:
            self._fallbacks[reason] += 1
            if reason in SHED_REASONS:
                self._rates.add("shed", self._clock())
            if message and (reason != BreakerOpen.reason or not self._last_error):  # keep why the breaker opened
                self._last_error, self._last_error_at = message, self._clock()

    def on_request(self, pairs: int) -> None:
        with self._lock:
            self._counts.update(http_requests=1, pairs_scored=pairs)

    def on_answer(self, url: str, seconds: float, pairs: int) -> None:
        """A server answered a request: its status row's figures, kept apart from the balancer's estimate."""
        with self._lock:
            answers = self._answers.pop(url, None) or deque(maxlen=ANSWERS_PER_SERVER)
            self._answers[url] = answers  # the newest last: the server that answered least recently goes first
            answers.append((self._clock(), seconds, max(pairs, 1)))
            if len(self._answers) > SERVERS_KEPT:
                del self._answers[next(iter(self._answers))]

    def on_retry(self, kind: str) -> None:
        """A request was sent again after an error or a 429 (``kind``: backoff or retry_after)."""
        self._count("retries")

    def on_queue_wait(self, seconds: float) -> None:
        with self._lock:
            self._queue_waits.append((self._clock(), seconds * 1000.0))

    def _count(self, event: str) -> None:
        with self._lock:
            self._counts[event] += 1

    rerank_cancelled = partialmethod(_count, "cancelled")  # the caller went away first: not reranked, no fallback
    on_stale_resend = partialmethod(_count, "stale_connection_retries")
    on_rate_limit_wait = partialmethod(_count, "rate_limit_waits")
    on_hedge = partialmethod(_count, "hedges")
    on_failover = partialmethod(_count, "failovers")
    on_budget_spent = partialmethod(_count, "retry_budget_exhausted")
    on_detection = partialmethod(_count, "detections")

    def shadow(self, kept_fraction: float, displacement: float) -> None:
        with self._lock:
            self._counts["shadow_recalls"] += 1
            self._shadow_kept += kept_fraction
            self._shadow_displacement += displacement

    def pool(self, size: int, returned: int, rescued: int = 0, floor_dropped: int = 0) -> None:
        with self._lock:
            self._counts.update(pools=1, pool_members=size, starved=int(size <= returned), rescued=rescued,
                                floor_dropped=floor_dropped)

    def snapshot(self, *, breakers: Mapping[str, str] | None = None, queued_pairs: int = 0, in_flight: int = 0,
                 replicas: tuple[ReplicaStatistics, ...] = ()) -> RerankerStatistics:
        with self._lock:
            since = (now := self._clock()) - self._window_s
            latencies, waits = (sorted(ms for at, ms in samples if at > since)
                                for samples in (self._latencies, self._queue_waits))
            counts, rates, fallbacks = self._counts, self._rates.per_second(now), dict(self._fallbacks)
            pools, shadows = counts["pools"], counts["shadow_recalls"]
            return RerankerStatistics(
                **{name: counts[name] for name in _COUNTS}, fallbacks=fallbacks,
                latency_p50_ms=percentile(latencies, 0.50), latency_p95_ms=percentile(latencies, 0.95),
                breakers=dict(breakers or {}), replicas=_timed(replicas, self._answers, since),
                queued_pairs=queued_pairs, in_flight=in_flight,
                shadow_mean_kept_fraction=_mean(self._shadow_kept, shadows),
                shadow_mean_displacement=_mean(self._shadow_displacement, shadows), latency_window_s=self._window_s,
                last_api=self._last_api, last_error=self._last_error,  # and its age: an old one is not a current one
                last_error_age_s=now - self._last_error_at if self._last_error else None,
                pool=PoolStatistics(recalls=pools, mean_size=_mean(counts["pool_members"], pools),
                                    starved_fraction=_mean(counts["starved"], pools), rescued=counts["rescued"],
                                    floor_dropped=counts["floor_dropped"]),
                load=LoadStatistics(offered_per_s=rates["offered"], goodput_per_s=rates["reranked"],
                                    shed_per_s=rates["shed"], queue_wait_p50_ms=percentile(waits, 0.50),
                                    queue_wait_p95_ms=percentile(waits, 0.95)),
            )


def _mean(total: float, count: int) -> float | None:
    return total / count if count else None


def _timed(rows: tuple[ReplicaStatistics, ...], answers: Mapping[str, deque[tuple[float, float, int]]],
           since: float) -> tuple[ReplicaStatistics, ...]:
    """Each server's row with its figures over its own answers (when, seconds, pairs) of the window."""
    timed = []
    for row in rows:
        mine = [(seconds, pairs) for at, seconds, pairs in answers.get(row.url, ()) if at > since]
        spent, pairs = 1000 * sum(seconds for seconds, _ in mine), sum(pairs for _, pairs in mine)
        timed.append(replace(row, latency_ms=_mean(spent, len(mine)), ms_per_pair=_mean(spent, pairs)))
    return tuple(timed)


def percentile(ordered: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    return ordered[min(max(1, math.ceil(fraction * len(ordered))), len(ordered)) - 1] if ordered else None


class RecentCounts:
    """Counts by kind over the last ``window_s`` seconds in one-second buckets: the status's rates now, and the
    retry budget's window. Not thread-safe (the recorder locks around it; the budget lives on the owner loop)."""

    def __init__(self, window_s: float = 60) -> None:
        self._window_s = max(1, math.ceil(window_s))
        self._seconds: deque[tuple[int, Counter[str]]] = deque()  # (second, counts), oldest first

    def add(self, kind: str, now: float) -> None:
        self._forget_before(now)
        if not self._seconds or self._seconds[-1][0] != int(now):
            self._seconds.append((int(now), Counter()))
        self._seconds[-1][1][kind] += 1

    def take_back(self, kind: str) -> None:
        """Uncount the newest ``kind`` kept (a second past the window counts for nothing either way)."""
        for _, counts in reversed(self._seconds):
            if counts[kind] > 0:
                counts[kind] -= 1
                return

    def totals(self, now: float) -> Counter[str]:
        self._forget_before(now)
        return sum((counts for _, counts in self._seconds), Counter())

    def per_second(self, now: float) -> dict[str, float]:
        """Each of ``_RATES`` a second over the window, or over the time since the oldest count kept."""
        totals = self.totals(now)
        span = min(float(self._window_s), max(1.0, now - self._seconds[0][0])) if self._seconds else 1.0
        return {kind: totals[kind] / span for kind in _RATES}

    def _forget_before(self, now: float) -> None:
        while self._seconds and self._seconds[0][0] <= int(now) - self._window_s:
            self._seconds.popleft()
