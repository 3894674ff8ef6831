"""The service on the owner loop, the one per process, and the hop that reaches it from other threads.

``RerankService`` is the composition root (config -> endpoints -> routes -> batcher -> ranking) and the
fail-safe boundary: nothing but cancellation leaves ``rerank``. Each replica of ``rerank_endpoint`` has
its own state and route (``endpoints``); one batcher per route group balances its batches over them
(``batching.replicas``). ``runtime()`` is the process's owner loop with its service, started on first
use; ``Handover`` is the one wait for work handed to it (from the public API, ``runtime``).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import dataclasses
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ..batching.batcher import MicroBatcher
from ..batching.endpoint_state import Replica
from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.deadline import backstop_remaining
from ..core.dialects import ScoreBatch
from ..core.dialects.wire import read_answer
from ..core.errors import BreakerOpen, InputTooLong, RateLimited, RerankError, ServerError
from ..core.probe_report import ProbeReport
from ..core.redaction import shown
from ..core.scores import PROBABILITY, RerankResult, cut_head, normalize, shared_scale, tighter_limits
from ..core.statistics import RerankerStatistics, StatsRecorder
from ..process.singletons import OwnerLoop, PerProcess
from .detection import Route, probe_endpoint, tls_of
from .endpoints import Endpoint, EndpointRegistry, Members, RouteBook
from .transport import HttpTransport

log = logging.getLogger("a0_reranker")
T = TypeVar("T")

_STATS: Final = PerProcess("stats", StatsRecorder)


def stats_recorder() -> StatsRecorder:
    """The process's counters: they outlive a restarted owner loop. Everyone counts what happens where it
    happens (``core.statistics``); the status tool, the panel and the CLI read its snapshot."""
    return _STATS.get()


TIMEOUT_MESSAGE: Final = "no answer before rerank_timeout"
CANCEL_WAIT_S: Final = 2.0  # on shutdown, what work still running gets to unwind before the session closes


class RerankService:
    """Use from the owner loop only (the runtime module is how other threads and loops reach it)."""

    def __init__(self, stats: StatsRecorder, transport: HttpTransport | None = None, *,
                 clock: Callable[[], float] = clock.now) -> None:
        self._stats = stats
        self._transport = transport or HttpTransport(on_stale_resend=stats.on_stale_resend)
        self._routes = RouteBook(self._transport, on_detection=stats.on_detection)
        self._registry = EndpointRegistry(stats, clock=clock, on_open=self._routes.forget_endpoint)

    async def rerank(self, query: str, documents: Sequence[str], config: RerankerConfig, deadline: float
                     ) -> RerankResult:
        """Best-first ``(index, score)`` pairs, or no ranking with the reason. Never raises but
        cancellation. Counts no outcome: its caller counts the one it returns (``runtime``)."""
        try:
            return await self._rerank(query, documents, config, deadline)
        except RerankError as exc:
            text = shown(str(exc), config.api_key) if exc.quotes_server_text else str(exc)
            return RerankResult(None, reason=exc.reason, message=text)
        except Exception as exc:
            log.exception("a0_reranker: unexpected error while reranking (recall keeps its stock order)")
            return RerankResult(None, reason="error", message=f"unexpected error: {type(exc).__name__}")

    async def probe(self, config: RerankerConfig, deadline: float) -> ProbeReport:
        """A live connection test that bypasses the detection cache (a fixed URL tests right at once)."""
        report = await probe_endpoint(self._transport, config, deadline)
        if not report.ok:
            self._routes.forget(config)
        return report.redacted(config.api_key)

    def live_state(self) -> dict[str, object]:
        return self._registry.live_state()

    def footprint(self) -> dict[str, int]:
        """Per-configuration state kept, and detections cached (bounded whatever the settings do) and
        under way."""
        return {**self._registry.footprint(), "detections": self._routes.cached, "detecting": self._routes.running}

    def statistics(self) -> RerankerStatistics:
        return self._stats.snapshot(**self.live_state())  # type: ignore[arg-type]

    async def close(self) -> None:
        await self._registry.close()
        await self._routes.close()
        await self._transport.close()

    # --- the rerank path ---------------------------------------------------------------------

    async def _rerank(
        self, query: str, documents: Sequence[str], config: RerankerConfig, deadline: float
    ) -> RerankResult:
        if not documents:
            return RerankResult([])
        endpoints = [self._registry.endpoint(config, url) for url in config.endpoints]
        usable = [e for e in endpoints if e.state.breaker.would_admit()]
        if not usable:
            raise BreakerOpen("the reranker failed repeatedly; skipping it until the breaker's next probe")
        if all(e.state.not_before >= deadline for e in usable):
            raise RateLimited(429, "the server asked us to wait (Retry-After) past this recall's deadline")
        routes = await self._routes.routes(config, deadline, usable)
        scale = shared_scale([route.scale for route in routes.values()])
        try:
            scored = await self._score(config, routes, {e.url: e for e in usable}, query, documents, deadline,
                                       to_probability=scale is None)
        except ServerError as exc:
            if exc.status in _ROUTE_GONE_STATUSES:
                self._routes.forget(config)
            raise
        answered = routes.get(scored.answered_by) or next(iter(routes.values()))
        return dataclasses.replace(scored, api=answered.dialect.api, scale=scale or PROBABILITY)

    async def _score(
        self, config: RerankerConfig, routes: dict[str, Route], endpoints: dict[str, Endpoint], query: str,
        documents: Sequence[str], deadline: float, *, to_probability: bool,
    ) -> RerankResult:
        batcher = self._batcher(config, routes, endpoints, to_probability)
        query_chars, doc_chars = config.max_query_chars, config.max_doc_chars
        try:
            return await batcher.score(cut_head(query, query_chars), [cut_head(d, doc_chars) for d in documents],
                                       deadline)
        except InputTooLong:
            tighter = tighter_limits(query_chars, doc_chars)
            if tighter == (query_chars, doc_chars):
                raise
            log.info("a0_reranker: the server said the input is too long; retrying once with tighter cuts")
            return await batcher.score(cut_head(query, tighter[0]), [cut_head(d, tighter[1]) for d in documents],
                                       deadline)

    def _batcher(self, config: RerankerConfig, routes: dict[str, Route], endpoints: dict[str, Endpoint],
                 to_probability: bool) -> MicroBatcher:
        """The batcher of this route group and of the replicas whose route is known, each with its own
        dialect (and, when their scales differ, each sending back probabilities)."""
        bound_to = [(url, route, endpoints[url].state) for url, route in routes.items()]
        return self._registry.group(config, to_probability, bound_to,
                                    lambda: self._members(config, routes, endpoints, to_probability))

    def _members(self, config: RerankerConfig, routes: dict[str, Route], endpoints: dict[str, Endpoint],
                 to_probability: bool) -> Members:
        # routes are cached without the instruction: bind this call's to the dialect that sends it
        bound = {url: dataclasses.replace(route, dialect=route.dialect.with_instruction(config.instruction))
                 for url, route in routes.items()}
        replicas = [Replica(url, endpoints[url].state, self._sender(route, config, to_probability))
                    for url, route in bound.items()]
        dialects = [route.dialect for route in bound.values()]
        return Members(replicas, mixes_queries=all(d.mixes_queries for d in dialects),
                       max_pairs=max(1, min(config.max_pairs_per_request, *(d.max_pairs for d in dialects))))

    def _sender(self, route: Route, config: RerankerConfig, to_probability: bool):  # type: ignore[no-untyped-def]
        transport, dialect, tls, api_key = self._transport, route.dialect, tls_of(config), config.api_key

        async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
            request = dialect.build(batch, route.model)
            answer = await transport.send(route.endpoint, request, deadline=deadline, api_key=api_key, tls=tls,
                                          may_resend=may_resend)
            scores = read_answer(dialect.parse, answer, batch)
            return normalize(scores, route.scale) if to_probability else scores

        return send


# Statuses that say the route itself no longer holds (the API moved, the key or the model changed).
# Not 5xx: an overloaded or crashing server still speaks the same API, and forgetting the route there
# makes every waiting recall re-run detection against that server, which then fails too.
_ROUTE_GONE_STATUSES: Final = frozenset({401, 403, 404, 405, 501})


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


@dataclass(frozen=True)
class Handover(Generic[T]):
    """Work handed to the owner loop, and the one wait for its outcome, blocking or awaited: until the
    deadline plus the backstop grace (``core.deadline``); past it the caller gets ``late`` and the owner's
    work is cancelled."""

    future: concurrent.futures.Future[T]
    deadline: float
    late: T

    @classmethod
    def start(cls, current: Runtime, deadline: float, late: T, func: Callable[..., Coroutine[Any, Any, T]],
              *args: Any) -> Handover[T]:
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
