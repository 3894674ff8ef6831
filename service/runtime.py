"""The public engine API: reach the one owner loop of this process from any thread or event loop.

``rerank_async`` and ``rerank`` compute the deadline once, hand the work to the owner loop and wait
for it no longer than that deadline; they return None instead of raising. The sync facade has no
logic of its own, and refuses to run on the owner thread, where it would deadlock.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..batching.owner_loop import OwnerLoop
from ..batching.process_state import discard, peek, shared
from ..core.config import RerankerConfig
from ..core.probe_report import ProbeReport
from ..core.statistics import CountOnce, RerankerStatistics, StatsRecorder
from .reranker_service import Ranking, RerankResult, RerankService

log = logging.getLogger("a0_reranker")

_RUNTIME = "runtime"
_STATS = "stats"
HANDOVER_S = 1.0  # a guard only: a result the service already counted is set on its future at once
# The owner loop enforces the deadline itself (the batcher's timers, the transport's timeouts) and
# decides the outcome; a caller waits this much longer before its backstop gives up on a stuck loop.
BACKSTOP_GRACE_S = 0.05
TIMED_OUT = RerankResult(None, reason="timeout", message="no answer before rerank_timeout")


@dataclass(frozen=True)
class Runtime:
    owner: OwnerLoop
    service: RerankService


def stats_recorder() -> StatsRecorder:
    """The process's counters (they outlive a restarted owner loop)."""
    return shared(_STATS, StatsRecorder)


def runtime() -> Runtime:
    """The process's owner loop and service, started on first use (and again after a fork)."""
    current: Runtime = shared(_RUNTIME, _start)
    if not current.owner.alive:
        discard(_RUNTIME)
        current = shared(_RUNTIME, _start)
    return current


def _start() -> Runtime:
    owner = OwnerLoop().start()
    current = Runtime(owner, RerankService(stats_recorder()))
    atexit.register(_stop, current)
    return current


def shutdown() -> None:
    """Stop the owner loop and close its HTTP session (tests, uninstall). The next call starts afresh."""
    current = discard(_RUNTIME)
    if current is not None:
        _stop(current)


def _stop(current: Runtime) -> None:
    if current.owner.alive and not current.owner.is_current_thread():
        try:
            current.owner.call(current.service.close)
        except Exception:  # shutting down: nothing useful to do with the error
            log.debug("a0_reranker: error while closing the service", exc_info=True)
        current.owner.stop()


def _valid_input(query: Any, documents: Any) -> bool:
    if not isinstance(query, str) or isinstance(documents, str | bytes):
        log.warning("a0_reranker: rerank() needs a query string and a list of document strings")
        return False
    try:
        valid = isinstance(documents, Sequence) and all(isinstance(d, str) for d in documents)
    except Exception:  # the caller's sequence failed while we iterated it
        valid = False
    if not valid:
        log.warning("a0_reranker: rerank() needs a list of document strings")
    return valid


def _refusal(query: Any, documents: Any, config: Any) -> RerankResult | None:
    """Why this call goes nowhere near the server, or None when it should be sent. A caller's mistake
    (settings that are no config, input that is no list of strings) is counted as a fallback."""
    if not isinstance(config, RerankerConfig):
        return _counted(RerankResult(None, reason="config", message="config: expected a RerankerConfig"))
    if not config.enabled:
        return RerankResult(None, reason="disabled", message="rerank_enabled is off")
    if not config.configured:
        return RerankResult(None, reason="not_configured", message="no endpoint is set")
    if not _valid_input(query, documents):
        return _counted(RerankResult(None, reason="bad_input", message="needs a query string and a list of strings"))
    return None


def _counted(refusal: RerankResult) -> RerankResult:
    stats_recorder().fallback(refusal.reason, refusal.message)
    return refusal


@dataclass(frozen=True)
class _Submitted:
    """A rerank handed to the owner loop: its future, its deadline, and who counts its outcome."""

    future: concurrent.futures.Future[RerankResult]
    deadline: float
    ticket: CountOnce

    @property
    def remaining(self) -> float:
        """Until the backstop: the deadline plus a grace for the owner loop to hand its outcome over."""
        return max(0.0, self.deadline + BACKSTOP_GRACE_S - time.monotonic())

    def abandon(self) -> bool:
        """The backstop passed without an outcome. True: this caller gave up first, so the work is
        cancelled and the timeout counted here. False: the service decided at the same moment and
        counted its own outcome; its result is being handed over, so take it."""
        if not self.ticket.claim():
            return False
        self.future.cancel()
        stats_recorder().fallback("timeout", TIMED_OUT.message)
        log.debug("a0_reranker: fallback to the stock order (timeout): %s", TIMED_OUT.message)
        return True


def _submit(current: Runtime, query: str, documents: Sequence[str], config: RerankerConfig,
            deadline: float) -> _Submitted:
    ticket = CountOnce()
    future = current.owner.submit(current.service.rerank, query, list(documents), config, deadline, ticket)
    return _Submitted(future, deadline, ticket)


async def rerank_result_async(query: str, documents: Sequence[str], *, config: RerankerConfig) -> RerankResult:
    """The ranking with how it went (API used, or why it fell back). Awaitable from any event loop;
    cancellation propagates, nothing else is raised."""
    refusal = _refusal(query, documents, config)
    if refusal is not None:
        return refusal
    deadline = time.monotonic() + config.timeout
    try:
        current = runtime()
        if current.owner.is_current_thread():
            return await current.service.rerank(query, list(documents), config, deadline)
        job = _submit(current, query, documents, config, deadline)
    except Exception:
        log.exception("a0_reranker: could not reach the reranker's event loop")
        return RerankResult(None, reason="error", message="the reranker's event loop is not available")
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job.future)), job.remaining)
    except TimeoutError:
        pass
    except asyncio.CancelledError:
        job.future.cancel()
        raise
    except Exception:
        log.exception("a0_reranker: unexpected error while waiting for a rerank")
        return RerankResult(None, reason="error", message="unexpected error while waiting")
    if job.abandon():
        return TIMED_OUT
    try:
        return await asyncio.wait_for(asyncio.wrap_future(job.future), HANDOVER_S)
    except Exception:
        log.exception("a0_reranker: a finished rerank was not handed over")
        return TIMED_OUT


async def rerank_async(query: str, documents: Sequence[str], *, config: RerankerConfig) -> Ranking | None:
    """Best-first ``(index, score)`` pairs, or None. Awaitable from any event loop; cancellation propagates."""
    return (await rerank_result_async(query, documents, config=config)).ranking


def rerank(query: str, documents: Sequence[str], *, config: RerankerConfig) -> Ranking | None:
    """The blocking form, for threads (also one whose own event loop is running). Never raises."""
    if _refusal(query, documents, config) is not None:
        return None
    deadline = time.monotonic() + config.timeout
    try:
        current = runtime()
        if current.owner.is_current_thread():
            log.error("a0_reranker: rerank() was called on the reranker's own loop; use rerank_async()")
            return None
        job = _submit(current, query, documents, config, deadline)
        try:
            return job.future.result(timeout=job.remaining).ranking
        except TimeoutError:
            return None if job.abandon() else job.future.result(timeout=HANDOVER_S).ranking
    except Exception:
        log.exception("a0_reranker: unexpected error in rerank()")
        return None


async def probe_async(config: RerankerConfig) -> ProbeReport:
    """Live connection test (bypasses the detection cache). Never raises."""
    if not isinstance(config, RerankerConfig):
        return ProbeReport.failure("", "config: expected a RerankerConfig", (), 0.0)
    if not config.configured:
        return ProbeReport.failure("", "no endpoint is set", (), 0.0)
    deadline = time.monotonic() + config.timeout
    try:
        current = runtime()
        if current.owner.is_current_thread():
            return await current.service.probe(config, deadline)
        future = current.owner.submit(current.service.probe, config, deadline)
        return await asyncio.wait_for(asyncio.wrap_future(future), deadline - time.monotonic() + 0.5)
    except TimeoutError:
        return ProbeReport.failure(config.endpoint, f"no answer within {config.timeout:g} s", (), config.timeout)
    except Exception as exc:
        log.exception("a0_reranker: connection test failed unexpectedly")
        return ProbeReport.failure(config.endpoint, f"unexpected error: {type(exc).__name__}", (), 0.0)


def probe(config: RerankerConfig) -> ProbeReport:
    """Blocking form of ``probe_async`` for threads and the CLI."""
    if not isinstance(config, RerankerConfig):
        return ProbeReport.failure("", "config: expected a RerankerConfig", (), 0.0)
    if not config.configured:
        return ProbeReport.failure("", "no endpoint is set", (), 0.0)
    try:
        current = runtime()
        if current.owner.is_current_thread():
            return ProbeReport.failure(config.endpoint, "probe() called on the reranker's own loop", (), 0.0)
        deadline = time.monotonic() + config.timeout
        return current.owner.call(current.service.probe, config, deadline)
    except Exception as exc:
        log.exception("a0_reranker: connection test failed unexpectedly")
        return ProbeReport.failure(config.endpoint, f"unexpected error: {type(exc).__name__}", (), 0.0)


def statistics() -> RerankerStatistics:
    """Counters plus the live state (breakers, queue, in flight); does not start the owner loop."""
    current: Runtime | None = peek(_RUNTIME)
    if current is None or not current.owner.alive or current.owner.is_current_thread():
        return stats_recorder().snapshot()
    try:
        return current.owner.call(_async_statistics, current.service)
    except Exception:
        return stats_recorder().snapshot()


async def _async_statistics(service: RerankService) -> RerankerStatistics:
    return service.statistics()
