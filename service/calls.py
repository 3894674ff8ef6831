"""The caller's side of the hop onto the owner loop, and the rerank calls, which count the outcome they return.
A call computes its deadline once and the owner loop enforces it; the caller waits one grace longer as a backstop
and returns instead of raising."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.deadline import backstop_remaining, deadline_in
from ..core.scores import RecallOutcome, RerankResult, choose, normalize, order_change, page_content
from ..core.statistics import StatsRecorder
from ..process.singletons import OwnerLoop, PerProcess, retired
from .reranker_service import RerankService

log = logging.getLogger("a0_reranker")
T = TypeVar("T")
D = TypeVar("D")
Work = Callable[[RerankService], Coroutine[Any, Any, T]]

_STATS: Final = PerProcess("stats", StatsRecorder)


def stats_recorder() -> StatsRecorder:
    return _STATS.get()


TIMED_OUT: Final = RerankResult(None, reason="timeout", message="no answer before rerank_timeout")
STOPPED: Final = RerankResult(None, reason="error", message="the reranker stopped before it answered")


class Retired(RuntimeError):
    """This copy of the code was retired (``singletons.forget_all``) and starts nothing: expected, not an error."""


@dataclass(frozen=True)
class Runtime:
    owner: OwnerLoop
    service: RerankService


def start(clock: Callable[[], float] = clock.now) -> Runtime:
    if retired():  # a recall that was running in this code when an update or uninstall retired it: its stock order
        raise Retired("a0_reranker was updated or uninstalled while this call ran; the old code starts nothing")
    owner = OwnerLoop().start()
    try:
        current = Runtime(owner, RerankService(stats_recorder(), clock=clock))
    except BaseException:
        owner.stop()  # a service that cannot be built leaves no loop thread behind
        raise
    owner.close_with(current.service.close)  # its HTTP session, however the loop comes to stop (at exit too)
    return current


RUNTIME: Final = PerProcess("runtime", start)


def runtime() -> Runtime:
    """The process's owner loop and service, started on first use (and again after a fork)."""
    current = RUNTIME.get()
    if not current.owner.alive:
        RUNTIME.discard()
        current = RUNTIME.get()
    return current


def stop(current: Runtime) -> None:
    if not current.owner.is_current_thread():
        current.owner.stop()


@dataclass(frozen=True)
class Handover(Generic[T]):
    """The wait for work on the owner loop: to the deadline plus the grace, then ``late`` (work cancelled);
    ``stopped`` (default ``late``) when the owner loop cancelled the work as it stopped (shutdown, update)."""

    future: concurrent.futures.Future[T]
    deadline: float
    late: T
    stopped: T | None = None

    def result(self) -> T:
        try:
            return self.future.result(timeout=backstop_remaining(self.deadline))
        except TimeoutError:  # past the backstop
            return self._delivered_or_late()
        except concurrent.futures.CancelledError:  # nobody but the stopping owner loop cancels it here
            return self._stopped()
        except BaseException:
            self.future.cancel()  # the waiting thread was interrupted (Ctrl-C): its work stops too
            raise

    async def result_async(self) -> T:
        try:  # not wait_for: on Python 3.11 it returns a result that lands with a cancellation
            async with asyncio.timeout(backstop_remaining(self.deadline)):
                return await asyncio.shield(asyncio.wrap_future(self.future))
        except TimeoutError:
            return self._delivered_or_late()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                self.future.cancel()  # the caller left: so does its work on the owner loop
                raise
            return self._stopped()  # nobody cancelled the caller: the owner loop stopped (shutdown, update)

    def _stopped(self) -> T:
        return self.late if self.stopped is None else self.stopped

    def _delivered_or_late(self) -> T:  # what the owner loop delivered just as the backstop fired
        future = self.future
        if future.cancel() or future.cancelled() or future.exception() is not None:
            return self.late
        return future.result()


async def on_owner_async(work: Work[T], deadline: float, late: T, stopped: T | None = None) -> T:
    current = runtime()
    if current.owner.is_current_thread():
        return await work(current.service)
    return await Handover(current.owner.submit(work, current.service), deadline, late, stopped).result_async()


def on_owner(work: Work[T], deadline: float, late: T, stopped: T | None = None) -> T | None:
    """The blocking form, for threads; None on the owner thread itself, where the wait would deadlock."""
    current = runtime()
    if current.owner.is_current_thread():
        return None
    return Handover(current.owner.submit(work, current.service), deadline, late, stopped).result()


def _refusal(query: Any, documents: Any, config: Any) -> RerankResult | None:
    """What a call gets without the server (a refusal; [] for no documents). A caller's mistake counts."""
    if not isinstance(config, RerankerConfig):
        return _settled(RerankResult(None, reason="config", message="config: expected a RerankerConfig"))
    if not config.enabled:
        return RerankResult(None, reason="disabled", message="rerank_enabled is off")
    if not config.configured:
        return RerankResult(None, reason="not_configured", message="no endpoint is set")
    try:
        valid = (isinstance(query, str) and isinstance(documents, Sequence) and not isinstance(documents, str | bytes)
                 and all(isinstance(d, str) for d in documents))
        empty = valid and not documents
    except Exception:  # the caller's sequence failed while we iterated it
        valid = False
    if not valid:
        log.warning("a0_reranker: rerank() needs a query string and a list of document strings")
        return _settled(RerankResult(None, reason="bad_input", message="needs a query string and a list of strings"))
    return RerankResult([]) if empty else None  # nothing to rank: no rerank to count (nor its API or latency)


def _accepted_texts(query: Any, documents: Any, config: Any) -> list[str] | RerankResult:
    """The documents copied, or ``_refusal``'s answer. Documents that fail when read again are the caller's bad
    input (counted), not ours; only the exception's type is told, as its text may quote a memory."""
    if (refused := _refusal(query, documents, config)) is not None:
        return refused
    try:
        return list(documents)
    except Exception as exc:
        log.warning("a0_reranker: rerank() could not read its documents (%s)", type(exc).__name__)
        return _settled(RerankResult(None, reason="bad_input",
                                     message=f"the documents raised {type(exc).__name__} when read again"))


def _settled(result: RerankResult, started: float = 0.0) -> RerankResult:
    """Counted where the caller gets it: the counters agree with callers however late a busy loop answers."""
    if result.ranking is None:
        stats_recorder().fell_back(result.reason, result.message)
        log.debug("a0_reranker: fallback to the stock order (%s): %s", result.reason, result.message)
    else:
        stats_recorder().reranked(clock.now() - started, result.api, retried=result.retries > 0)
    return result


async def rerank_result_async(query: str, documents: Sequence[str], *, config: RerankerConfig,
                              deadline: float | None = None) -> RerankResult:
    """The ranking with how it went (API used, or why it fell back), by ``deadline`` (default ``rerank_timeout``
    from now); raises nothing but cancellation."""
    if isinstance(texts := _accepted_texts(query, documents, config), RerankResult):
        return texts
    due = deadline_in(config.timeout) if deadline is None else deadline
    stats_recorder().rerank_started()
    started = clock.now()
    try:
        result = await on_owner_async(lambda service: service.rerank(query, texts, config, due), due, TIMED_OUT,
                                      STOPPED)
    except asyncio.CancelledError:
        stats_recorder().rerank_cancelled()
        raise
    except Retired as exc:
        result = _retired(exc)
    except Exception:
        log.exception("a0_reranker: could not reach the reranker's event loop")
        result = RerankResult(None, reason="error", message="the reranker's event loop is not available")
    return _settled(result, started)


def rerank_result(query: str, documents: Sequence[str], *, config: RerankerConfig) -> RerankResult:
    """Blocking form for threads (also one running its own loop); raises only what interrupts it (cancelled)."""
    if isinstance(texts := _accepted_texts(query, documents, config), RerankResult):
        return texts
    stats_recorder().rerank_started()
    deadline, started = deadline_in(config.timeout), clock.now()
    try:
        result = on_owner(lambda service: service.rerank(query, texts, config, deadline), deadline, TIMED_OUT,
                          STOPPED)
    except Retired as exc:
        result = _retired(exc)
    except Exception:
        log.exception("a0_reranker: unexpected error in rerank()")
        result = RerankResult(None, reason="error", message="unexpected error while waiting")
    except BaseException:
        stats_recorder().rerank_cancelled()
        raise
    if result is None:
        log.error("a0_reranker: rerank() was called on the reranker's own loop; use rerank_async()")
        result = RerankResult(None, reason="error", message="rerank() was called on the reranker's own loop")
    return _settled(result, started)


def _retired(exc: Retired) -> RerankResult:
    log.info("a0_reranker: %s (retired code): stock order", exc)
    return STOPPED


async def rerank_pool(query: str, pool: Sequence[D], *, limit: int, config: RerankerConfig,
                      text_of: Callable[[D], str] = page_content, deadline: float | None = None) -> RecallOutcome[D]:
    """At most ``limit`` of ``pool`` (stock order, best first) for ``query``, none below ``rerank_min_score``;
    the stock top-``limit`` when the reranker is unavailable or in shadow mode. ``deadline``: as above."""
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
    returned = outcome.floor_dropped + len(outcome.documents)  # the stock answer's count: what a recall returns
    stats_recorder().pool(outcome.candidates, returned, outcome.rescued, outcome.floor_dropped)
    return outcome
