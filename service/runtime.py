"""The public engine API: reach the one owner loop of this process from any thread or event loop, and
what a reranked recall returns.

``rerank_async`` and ``rerank`` compute the deadline once and hand the work to the owner loop, which
enforces it; the caller waits one grace longer as a backstop (``Handover``). Each counts the outcome
it returns, once, where it returns it, and returns None instead of raising. The sync form refuses to
run on the owner thread, where it would deadlock. The owner loop's lifecycle (``runtime``,
``restart``, ``shutdown``) is the service module's; callers find it here.

``rerank_pool`` picks what a recall returns from the candidate pool in stock order (A0's own result
first, then the memories a wider search found below A0's threshold): the reranker's best ``limit``
without those below ``rerank_min_score``, or the stock top-``limit`` in shadow mode and on any failure.
It counts every pool it is given. The demo and the CLI use it too, so they show what the plugin does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.deadline import deadline_in
from ..core.probe_report import ProbeReport
from ..core.scores import Ranking, RecallOutcome, choose, normalize, order_change, page_content
from ..core.statistics import RerankerStatistics
from .reranker_service import (
    TIMEOUT_MESSAGE,
    Handover,
    RerankResult,
    RerankService,
    Runtime,
    running,
    runtime,
    stats_recorder,
)
from .reranker_service import restart as restart
from .reranker_service import shutdown as shutdown

log = logging.getLogger("a0_reranker")
D = TypeVar("D")

TIMED_OUT: Final = RerankResult(None, reason="timeout", message=TIMEOUT_MESSAGE)
STATISTICS_WAIT_S: Final = 1.0  # the live state is worth this much wait; after it, the counters alone


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
        return _settled(RerankResult(None, reason="config", message="config: expected a RerankerConfig"))
    if not config.enabled:
        return RerankResult(None, reason="disabled", message="rerank_enabled is off")
    if not config.configured:
        return RerankResult(None, reason="not_configured", message="no endpoint is set")
    if not _valid_input(query, documents):
        return _settled(RerankResult(None, reason="bad_input", message="needs a query string and a list of strings"))
    return None


def _started() -> float:
    stats_recorder().rerank_started()
    return clock.now()


def _settled(result: RerankResult, started: float = 0.0) -> RerankResult:
    """Count the outcome the caller returns, where it returns it: the one place an outcome is counted, so
    the counters agree with what callers got however late an owner loop on a busy machine answers."""
    if result.ranking is None:
        stats_recorder().fell_back(result.reason, result.message)
        log.debug("a0_reranker: fallback to the stock order (%s): %s", result.reason, result.message)
    else:
        stats_recorder().reranked(clock.now() - started, result.api, retried=result.retries > 0)
    return result


async def rerank_result_async(query: str, documents: Sequence[str], *, config: RerankerConfig,
                              deadline: float | None = None) -> RerankResult:
    """The ranking with how it went (API used, or why it fell back), by ``deadline`` (on ``core.deadline``'s
    clock; default ``rerank_timeout`` from now). Awaitable from any event loop; cancellation propagates,
    nothing else is raised."""
    if (refusal := _refusal(query, documents, config)) is not None:
        return refusal
    deadline = deadline_in(config.timeout) if deadline is None else deadline
    started = _started()
    try:
        return _settled(await _rerank_from_any_loop(query, list(documents), config, deadline), started)
    except asyncio.CancelledError:
        stats_recorder().rerank_cancelled()
        raise


async def _rerank_from_any_loop(query: str, documents: list[str], config: RerankerConfig, deadline: float
                                ) -> RerankResult:
    try:
        current = runtime()
        if current.owner.is_current_thread():
            return await current.service.rerank(query, documents, config, deadline)
        handover = _rerank_handover(current, query, documents, config, deadline)
    except Exception:
        log.exception("a0_reranker: could not reach the reranker's event loop")
        return RerankResult(None, reason="error", message="the reranker's event loop is not available")
    try:
        return await handover.result_async()
    except Exception:
        log.exception("a0_reranker: unexpected error while waiting for a rerank")
        return RerankResult(None, reason="error", message="unexpected error while waiting")


def _rerank_handover(current: Runtime, query: str, documents: list[str], config: RerankerConfig, deadline: float
                     ) -> Handover[RerankResult]:
    return Handover.start(current, deadline, TIMED_OUT, current.service.rerank, query, documents, config, deadline)


async def rerank_async(query: str, documents: Sequence[str], *, config: RerankerConfig) -> Ranking | None:
    """Best-first ``(index, score)`` pairs, or None. Awaitable from any event loop; cancellation propagates."""
    return (await rerank_result_async(query, documents, config=config)).ranking


def rerank_result(query: str, documents: Sequence[str], *, config: RerankerConfig) -> RerankResult:
    """The blocking form of ``rerank_result_async``, for threads (also one whose own event loop is
    running). Never raises."""
    if (refusal := _refusal(query, documents, config)) is not None:
        return refusal
    deadline, started = deadline_in(config.timeout), _started()
    try:
        current = runtime()
        if current.owner.is_current_thread():
            log.error("a0_reranker: rerank() was called on the reranker's own loop; use rerank_async()")
            result = RerankResult(None, reason="error", message="rerank() was called on the reranker's own loop")
        else:
            result = _rerank_handover(current, query, list(documents), config, deadline).result()
    except Exception:
        log.exception("a0_reranker: unexpected error in rerank()")
        result = RerankResult(None, reason="error", message="unexpected error while waiting")
    return _settled(result, started)


def rerank(query: str, documents: Sequence[str], *, config: RerankerConfig) -> Ranking | None:
    """Best-first ``(index, score)`` pairs, or None; blocking. Never raises."""
    return rerank_result(query, documents, config=config).ranking


async def rerank_pool(query: str, pool: Sequence[D], *, limit: int, config: RerankerConfig,
                      text_of: Callable[[D], str] = page_content, deadline: float | None = None) -> RecallOutcome[D]:
    """Rerank ``pool`` (stock order, best first) for ``query`` and keep at most ``limit`` documents.

    Returns the stock top-``limit`` when the reranker is unavailable or in shadow mode. ``deadline``
    (monotonic; default ``rerank_timeout`` from now) lets a caller whose own work came first keep
    the whole of it within one timeout.
    """
    started = clock.now()
    stock = RecallOutcome(list(pool[:limit]), applied=False, scored=False, candidates=len(pool), elapsed_s=0.0)
    if limit <= 0:
        return stock
    if len(pool) < 2:
        return _counted(stock)
    result = await rerank_result_async(query, [text_of(d) for d in pool], config=config, deadline=deadline)
    elapsed, ranking = clock.now() - started, result.ranking
    if ranking is None or len(ranking) != len(pool):
        return _counted(dataclasses.replace(stock, elapsed_s=elapsed, reason=result.reason or "error",
                                            message=result.message))
    change = order_change([index for index, _ in ranking], len(stock.documents))
    scored = dataclasses.replace(stock, scored=True, elapsed_s=elapsed, api=result.api, change=change,
                                 ranking=ranking, relevance=normalize([score for _, score in ranking], result.scale),
                                 retries=result.retries, failover_to=result.failover_to)
    if not config.apply:
        stats_recorder().shadow(change.kept / change.limit if change.limit else 1.0, change.mean_displacement)
        return _counted(scored)
    return _counted(choose(scored, pool, limit, config.min_score))


def _counted(outcome: RecallOutcome[D]) -> RecallOutcome[D]:
    """Record the pool behind ``outcome`` (how many the stock answer has is what a recall returns)."""
    returned = outcome.floor_dropped + len(outcome.documents)
    stats_recorder().pool(outcome.candidates, returned, outcome.rescued, outcome.floor_dropped)
    return outcome


def _probe_refusal(config: Any) -> ProbeReport | None:
    if not isinstance(config, RerankerConfig):
        return ProbeReport.failure("", "config: expected a RerankerConfig", (), 0.0)
    if not config.configured:
        return ProbeReport.failure("", "no endpoint is set", (), 0.0)
    return None


def _probe_handover(current: Runtime, config: RerankerConfig, deadline: float) -> Handover[ProbeReport]:
    late = ProbeReport.failure(config.endpoint, f"no answer within {config.timeout:g} s", (), config.timeout)
    return Handover.start(current, deadline, late, current.service.probe, config, deadline)


async def probe_async(config: RerankerConfig) -> ProbeReport:
    """Live connection test (bypasses the detection cache). Never raises."""
    if (refusal := _probe_refusal(config)) is not None:
        return refusal
    deadline = deadline_in(config.timeout)
    try:
        current = runtime()
        if current.owner.is_current_thread():
            return await current.service.probe(config, deadline)
        return await _probe_handover(current, config, deadline).result_async()
    except Exception as exc:
        log.exception("a0_reranker: connection test failed unexpectedly")
        return ProbeReport.failure(config.endpoint, f"unexpected error: {type(exc).__name__}", (), 0.0)


def probe(config: RerankerConfig) -> ProbeReport:
    """Blocking form of ``probe_async`` for threads and the CLI."""
    if (refusal := _probe_refusal(config)) is not None:
        return refusal
    try:
        current = runtime()
        if current.owner.is_current_thread():
            return ProbeReport.failure(config.endpoint, "probe() called on the reranker's own loop", (), 0.0)
        return _probe_handover(current, config, deadline_in(config.timeout)).result()
    except Exception as exc:
        log.exception("a0_reranker: connection test failed unexpectedly")
        return ProbeReport.failure(config.endpoint, f"unexpected error: {type(exc).__name__}", (), 0.0)


def statistics() -> RerankerStatistics:
    """Counters plus the live state (breakers, queue, in flight); does not start the owner loop."""
    current = running()
    if current is None or current.owner.is_current_thread():
        return stats_recorder().snapshot()
    try:  # from A0's event loop too (the status tool): never wait long on a busy owner loop
        return current.owner.submit(_async_statistics, current.service).result(timeout=STATISTICS_WAIT_S)
    except Exception:  # late or stopped: the counters without the live state
        return stats_recorder().snapshot()


async def _async_statistics(service: RerankService) -> RerankerStatistics:
    return service.statistics()
