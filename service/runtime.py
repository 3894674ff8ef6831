"""The public engine API: the rerank calls (``calls``'s, named here too), the live connection test, the
statistics with the live state, restart and shutdown. Never raises."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, Final

from ..core.config import RerankerConfig
from ..core.deadline import deadline_in
from ..core.probe_report import ProbeReport
from ..core.scores import Ranking
from ..core.statistics import RerankerStatistics
from .calls import RUNTIME, Retired, Runtime, Work, on_owner, on_owner_async, start, stop
from .calls import rerank_pool as rerank_pool
from .calls import rerank_result as rerank_result
from .calls import rerank_result_async as rerank_result_async
from .calls import runtime as runtime
from .calls import stats_recorder as stats_recorder
from .reranker_service import RerankService

log = logging.getLogger("a0_reranker")

STATISTICS_WAIT_S: Final = 1.0  # the live state is worth this much wait; after it, the counters alone


async def rerank_async(query: str, documents: Sequence[str], *, config: RerankerConfig) -> Ranking | None:
    """Best-first ``(index, score)`` pairs, or None. Awaitable from any event loop; cancellation propagates."""
    return (await rerank_result_async(query, documents, config=config)).ranking


def rerank(query: str, documents: Sequence[str], *, config: RerankerConfig) -> Ranking | None:
    """Best-first ``(index, score)`` pairs, or None; blocking. Never raises."""
    return rerank_result(query, documents, config=config).ranking


def _probe_failed(config: RerankerConfig, exc: Exception) -> ProbeReport:
    if isinstance(exc, Retired):  # expected during an update, as on the recall path: one line, no traceback
        log.info("a0_reranker: %s (retired code): connection not tested", exc)
        return ProbeReport.failure(config.endpoint, str(exc))
    log.exception("a0_reranker: connection test failed unexpectedly")
    return ProbeReport.failure(config.endpoint, f"unexpected error: {type(exc).__name__}")


def _probe_call(config: Any) -> ProbeReport | tuple[Work[ProbeReport], float, ProbeReport]:
    """The refusal of ``config`` before any request, or its probe's work, deadline and late report."""
    if not isinstance(config, RerankerConfig):
        return ProbeReport.failure("", "config: expected a RerankerConfig")
    if not config.configured:
        return ProbeReport.failure("", "no endpoint is set")
    deadline = deadline_in(config.timeout)
    late = ProbeReport.failure(config.endpoint, f"no answer within {config.timeout:g} s", (), config.timeout)
    return (lambda service: service.probe(config, deadline)), deadline, late


async def probe_async(config: RerankerConfig) -> ProbeReport:
    """Live connection test (bypasses the detection cache). Never raises."""
    if isinstance(call := _probe_call(config), ProbeReport):
        return call
    try:
        return await on_owner_async(*call)
    except Exception as exc:
        return _probe_failed(config, exc)


def probe(config: RerankerConfig) -> ProbeReport:
    """Blocking form of ``probe_async`` for threads and the CLI."""
    if isinstance(call := _probe_call(config), ProbeReport):
        return call
    try:
        report = on_owner(*call)
    except Exception as exc:
        return _probe_failed(config, exc)
    return report or ProbeReport.failure(config.endpoint, "probe() called on the reranker's own loop")


def statistics(servers: Collection[str] | None = None, key: str | None = None) -> RerankerStatistics:
    """Counters plus the live state (``EndpointRegistry.live_state``'s); starts no owner loop."""
    current = running()
    if current is None or current.owner.is_current_thread():
        return stats_recorder().snapshot()
    try:  # never wait long on a busy owner loop (blocks: the status tool calls it in a worker thread)
        return current.owner.submit(_with_live_state, current.service, servers, key).result(
            timeout=STATISTICS_WAIT_S)
    except Exception:  # late or stopped: the counters without the live state
        return stats_recorder().snapshot()


async def _with_live_state(service: RerankService, servers: Collection[str] | None, key: str | None
                           ) -> RerankerStatistics:
    return stats_recorder().snapshot(**service.live_state(servers, key))  # type: ignore[arg-type]


def running() -> Runtime | None:
    current = RUNTIME.peek()
    return current if current is not None and current.owner.alive else None


def restart(*, clock: Callable[[], float]) -> Runtime:
    """A fresh owner loop and service whose breakers read ``clock``: tests move it on, not wait out a cooldown."""
    shutdown()
    return RUNTIME.get(lambda: start(clock))


def shutdown() -> None:
    """Stop the owner loop and close its HTTP session (tests, uninstall); the next call starts afresh."""
    current = RUNTIME.discard()
    if current is not None:
        stop(current)
