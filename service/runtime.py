"""The public engine API: reach the one owner loop of this process from any thread or event loop.

``rerank_async`` and ``rerank`` compute the deadline once and hand the work to the owner loop, which
enforces it. The caller waits one grace longer as a backstop against a stuck loop (``core.deadline``);
both forms share that one wait (``_Handover``), and each counts the outcome it returns, once, where it
returns it. They return None instead of raising. The sync form has no logic of its own, and
refuses to run on the owner thread, where it would deadlock.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.deadline import backstop_remaining, deadline_in
from ..core.probe_report import ProbeReport
from ..core.scores import Ranking
from ..core.statistics import RerankerStatistics
from ..process.singletons import OwnerLoop, PerProcess
from .reranker_service import TIMEOUT_MESSAGE, RerankResult, RerankService, stats_recorder

log = logging.getLogger("a0_reranker")
T = TypeVar("T")

TIMED_OUT: Final = RerankResult(None, reason="timeout", message=TIMEOUT_MESSAGE)
CANCEL_WAIT_S: Final = 2.0  # on shutdown, what work still running gets to unwind before the session closes
STATISTICS_WAIT_S: Final = 1.0  # the live state is worth this much wait; after it, the counters alone


@dataclass(frozen=True)
class Runtime:
    owner: OwnerLoop
    service: RerankService


def _start(clock: Callable[[], float] = clock.now) -> Runtime:
    owner = OwnerLoop().start()
    current = Runtime(owner, RerankService(stats_recorder(), clock=clock))
    atexit.register(_stop, current)
    return current


_RUNTIME: Final = PerProcess("runtime", _start)


def runtime() -> Runtime:
    """The process's owner loop and service, started on first use (and again after a fork)."""
    current = _RUNTIME.get()
    if not current.owner.alive:
        _RUNTIME.discard()
        current = _RUNTIME.get()
    return current


def running() -> Runtime | None:
    """The runtime if one is running, without starting one."""
    current = _RUNTIME.peek()
    return current if current is not None and current.owner.alive else None


def restart(*, clock: Callable[[], float]) -> Runtime:
    """A fresh owner loop and service whose breakers and retry budgets read ``clock``: tests move it on
    instead of waiting out a real cooldown."""
    shutdown()
    return _RUNTIME.get_or_put(lambda: _start(clock))


def shutdown() -> None:
    """Stop the owner loop and close its HTTP session (tests, uninstall). The next call starts afresh."""
    current = _RUNTIME.discard()
    if current is not None:
        _stop(current)


def _stop(current: Runtime) -> None:
    if current.owner.alive and not current.owner.is_current_thread():
        for step in (lambda: current.owner.call(current.owner.cancel_running, CANCEL_WAIT_S),
                     lambda: current.owner.call(current.service.close)):
            try:
                step()
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
        return _settled(RerankResult(None, reason="config", message="config: expected a RerankerConfig"))
    if not config.enabled:
        return RerankResult(None, reason="disabled", message="rerank_enabled is off")
    if not config.configured:
        return RerankResult(None, reason="not_configured", message="no endpoint is set")
    if not _valid_input(query, documents):
        return _settled(RerankResult(None, reason="bad_input", message="needs a query string and a list of strings"))
    return None


@dataclass(frozen=True)
class _Handover(Generic[T]):
    """Work handed to the owner loop, and the one wait for its outcome, blocking or awaited: until the
    deadline plus the backstop grace; past it the caller gets ``late`` and the owner's work is cancelled."""

    future: concurrent.futures.Future[T]
    deadline: float
    late: T

    @classmethod
    def start(cls, current: Runtime, deadline: float, late: T, func: Callable[..., Coroutine[Any, Any, T]],
              *args: Any) -> _Handover[T]:
        return cls(current.owner.submit(func, *args), deadline, late)

    def result(self) -> T:
        try:
            return self.future.result(timeout=backstop_remaining(self.deadline))
        except (TimeoutError, concurrent.futures.CancelledError):  # past the backstop, or the owner stopped
            return self._delivered_or_late()

    async def result_async(self) -> T:
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self.future)),
                                          backstop_remaining(self.deadline))
        except TimeoutError:
            return self._delivered_or_late()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                self.future.cancel()  # the caller left: so does its work on the owner loop
                raise
            return self.late  # nobody cancelled the caller: the owner loop stopped (shutdown, update)

    def _delivered_or_late(self) -> T:
        """What the owner loop delivered just as the backstop fired, else ``late`` (its work is cancelled)."""
        future = self.future
        if future.cancel() or future.cancelled() or future.exception() is not None:
            return self.late
        return future.result()


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
    refusal = _refusal(query, documents, config)
    if refusal is not None:
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
        handover = _Handover.start(current, deadline, TIMED_OUT, current.service.rerank, query, documents, config,
                                   deadline)
    except Exception:
        log.exception("a0_reranker: could not reach the reranker's event loop")
        return RerankResult(None, reason="error", message="the reranker's event loop is not available")
    try:
        return await handover.result_async()
    except Exception:
        log.exception("a0_reranker: unexpected error while waiting for a rerank")
        return RerankResult(None, reason="error", message="unexpected error while waiting")


async def rerank_async(query: str, documents: Sequence[str], *, config: RerankerConfig) -> Ranking | None:
    """Best-first ``(index, score)`` pairs, or None. Awaitable from any event loop; cancellation propagates."""
    return (await rerank_result_async(query, documents, config=config)).ranking


def rerank_result(query: str, documents: Sequence[str], *, config: RerankerConfig) -> RerankResult:
    """The blocking form of ``rerank_result_async``, for threads (also one whose own event loop is
    running). Never raises."""
    refusal = _refusal(query, documents, config)
    if refusal is not None:
        return refusal
    deadline = deadline_in(config.timeout)
    started = _started()
    try:
        current = runtime()
        if current.owner.is_current_thread():
            log.error("a0_reranker: rerank() was called on the reranker's own loop; use rerank_async()")
            result = RerankResult(None, reason="error", message="rerank() was called on the reranker's own loop")
        else:
            result = _Handover.start(current, deadline, TIMED_OUT, current.service.rerank, query, list(documents),
                                     config, deadline).result()
    except Exception:
        log.exception("a0_reranker: unexpected error in rerank()")
        result = RerankResult(None, reason="error", message="unexpected error while waiting")
    return _settled(result, started)


def rerank(query: str, documents: Sequence[str], *, config: RerankerConfig) -> Ranking | None:
    """Best-first ``(index, score)`` pairs, or None; blocking. Never raises."""
    return rerank_result(query, documents, config=config).ranking


def _probe_refusal(config: Any) -> ProbeReport | None:
    if not isinstance(config, RerankerConfig):
        return ProbeReport.failure("", "config: expected a RerankerConfig", (), 0.0)
    if not config.configured:
        return ProbeReport.failure("", "no endpoint is set", (), 0.0)
    return None


def _probe_handover(current: Runtime, config: RerankerConfig, deadline: float) -> _Handover[ProbeReport]:
    late = ProbeReport.failure(config.endpoint, f"no answer within {config.timeout:g} s", (), config.timeout)
    return _Handover.start(current, deadline, late, current.service.probe, config, deadline)


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
