"""The one writer of the counters: every outcome is reported here and recorded once.

Each rerank's outcome is reported by its caller, the one that returns it (``runtime``), so the counters
agree with what callers got; each request's events by the dispatch step on the owner loop, where
they happen (``DispatchEvents``); and the recall path reports a refused call, settings that do not
validate, a pool and what came of it. No other module writes the recorder; the status
tool, the panel and the CLI read its snapshot through ``service.runtime.statistics``.
"""

from __future__ import annotations

import logging
from typing import Final

from ..core.statistics import StatsRecorder
from ..process.registry import Slot

log = logging.getLogger("a0_reranker")

_RECORDER: Final = Slot("stats", StatsRecorder)


def recorder() -> StatsRecorder:
    """The process's counters (they outlive a restarted owner loop); read them, reset them in tests."""
    return _RECORDER.get()


class Accounting:
    """What gets counted, in the words of those who report it."""

    def __init__(self, stats: StatsRecorder | None = None) -> None:
        self._stats = stats or recorder()

    # --- reranks (their callers, on any thread) -------------------------------------------------

    def started(self) -> None:
        self._stats.rerank_started()

    def reranked(self, latency_s: float, api: str, *, retried: bool) -> None:
        self._stats.rerank_succeeded(latency_s, api, retried=retried)

    def fell_back(self, reason: str, message: str = "") -> None:
        """A call kept its stock order, for ``reason`` (``message`` is already masked)."""
        self._stats.fallback(reason, message)
        log.debug("a0_reranker: fallback to the stock order (%s): %s", reason, message)

    def cancelled(self) -> None:
        self._stats.rerank_cancelled()

    # --- requests (the dispatch step: DispatchEvents) --------------------------------------------

    def on_request(self, pairs: int) -> None:
        self._stats.request_sent(pairs)

    def on_retry(self, cause: str) -> None:
        self._stats.retried(cause)

    def on_stale_resend(self) -> None:
        """The transport sent a request again on a fresh connection (any request: scoring or detection)."""
        self._stats.retried("stale_connection")

    def on_rate_limit_wait(self) -> None:
        self._stats.rate_limit_wait()

    def on_failover(self) -> None:
        self._stats.failed_over()

    def on_hedge(self) -> None:
        self._stats.hedged()

    def on_budget_spent(self) -> None:
        self._stats.retry_budget_exhausted()

    def on_queue_wait(self, seconds: float) -> None:
        self._stats.queue_waited(seconds)

    # --- detection (the route book) --------------------------------------------------------------

    def on_detection(self) -> None:
        self._stats.detected()

    # --- recalls (the recall path) ---------------------------------------------------------------

    def pool(self, candidates: int, returned: int, rescued: int = 0, floor_dropped: int = 0) -> None:
        self._stats.pool_seen(candidates, returned, rescued, floor_dropped)

    def shadow(self, kept_fraction: float, displacement: float) -> None:
        self._stats.shadow_compared(kept_fraction, displacement)
