"""``RerankService``, the composition root on the owner loop (config -> endpoints -> routes -> batcher -> ranking)
and fail-safe boundary, and ``RouteBook``, its detected routes per replica (async-lru: identical detections share
one run, which ends even when its callers leave; a route ``DETECTION_TTL_S`` old is checked again in the background
and serves meanwhile). A known route is read without a task or a turn of the loop: a burst reaches its queue
together."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from async_lru import alru_cache

from ..batching.batcher import MicroBatcher
from ..batching.endpoint_state import Replica
from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.dialects.wire import ScoreBatch, read_answer, token_parts
from ..core.errors import (
    BreakerOpen,
    DeadlineExceeded,
    InputTooLong,
    RateLimited,
    RerankError,
    ServerError,
    TooManyTexts,
)
from ..core.probe_report import ProbeReport
from ..core.redaction import shown
from ..core.scores import PROBABILITY, RerankResult, cut_head, normalize, shared_scale, tighter_limits
from ..core.statistics import StatsRecorder
from ..process.singletons import cancel_and_wait
from .detection import Route, probe_endpoint, resolve_route, tls_of
from .endpoints import Endpoint, EndpointRegistry, HttpTransport, Members
from .route_checks import DETECTION_TTL_S, ROUTE_FIELDS, Detection, KnownRoute, detect, held_off, recheck

log = logging.getLogger("a0_reranker")


class RerankService:
    def __init__(self, stats: StatsRecorder, *, clock: Callable[[], float] = clock.now) -> None:
        self._transport = HttpTransport(on_stale_resend=stats.on_stale_resend)
        self._on_part_sent = functools.partial(stats.on_request, 0)  # a request past the first of a token split
        self._routes = RouteBook(self._transport, on_detection=stats.on_detection, clock=clock)
        self._registry = EndpointRegistry(stats, clock=clock, on_open=self._routes.forget_endpoint)
        self._closed = False

    async def rerank(self, query: str, documents: Sequence[str], config: RerankerConfig, deadline: float
                     ) -> RerankResult:
        """The ranking, or none with the reason; raises only cancellation. Counts no outcome (``calls`` does)."""
        try:
            return await self._rerank(query, documents, config, deadline)
        except RerankError as exc:
            text = shown(str(exc), config.api_key) if exc.quotes_server_text else str(exc)
            return RerankResult(None, reason=exc.reason, message=text)
        except Exception as exc:
            log.exception("a0_reranker: unexpected error while reranking (recall keeps its stock order)")
            return RerankResult(None, reason="error", message=f"unexpected error: {type(exc).__name__}")

    async def probe(self, config: RerankerConfig, deadline: float) -> ProbeReport:
        """A live test past the detection cache (a fixed URL tests right at once) and the breaker, not a 429's hold."""
        report = await probe_endpoint(self._transport, config, deadline,
                                      lambda url: held_off(self._registry.endpoint(config, url).state, deadline))
        if not report.ok:
            self._routes.forget(config)
        return report.redacted(config.api_key)

    def live_state(self, shown: Collection[str] | None = None, key: str | None = None) -> dict[str, object]:
        return self._registry.live_state(shown, key)

    def footprint(self) -> dict[str, int]:
        """State kept per configuration, detections cached and under way: bounded whatever the settings do."""
        return {**self._registry.footprint(), "detections": self._routes.cached, "detecting": self._routes.running}

    async def close(self) -> None:
        """Fail what is queued, stop the detections, close the HTTP sessions last; a call during or after it is
        refused (none may open a session once closed)."""
        self._closed = True
        async with contextlib.AsyncExitStack() as steps:  # run last-in first-out, each whatever the others raise
            steps.push_async_callback(self._transport.close)
            steps.push_async_callback(self._routes.close)
            await self._registry.close()

    async def _rerank(self, query: str, documents: Sequence[str], config: RerankerConfig, deadline: float, *,
                      may_split: bool = True) -> RerankResult:
        if not documents:
            return RerankResult([])
        if self._closed:
            raise RerankError("the reranker is shutting down")
        endpoints = [self._registry.endpoint(config, url) for url in config.endpoints]
        usable = [e for e in endpoints if e.state.breaker.would_admit()]
        if not usable:
            raise BreakerOpen("the reranker failed repeatedly; skipping it until the breaker's next probe")
        if all(e.state.not_before >= deadline for e in usable):
            raise RateLimited(429, "the server asked us to wait (Retry-After) past this recall's deadline")
        routes = await self._routes.routes(config, deadline, usable)
        scale = shared_scale([route.scale for route in routes.values()])
        batcher = self._batcher(config, routes, {e.url: e for e in usable}, to_probability=scale is None)
        try:
            scored = await self._score(batcher, config, query, documents, deadline)
        except ServerError as exc:
            if isinstance(exc, TooManyTexts) and may_split:  # the routes take its word: the batch is split to it
                log.info("a0_reranker: the server takes at most %d texts a request; sending no more", exc.limit)
                await self._routes.cap(config, routes, exc.limit)
                return await self._rerank(query, documents, config, deadline, may_split=False)
            if exc.route_gone:
                await self._routes.forget_refused(config, routes)
            raise
        answered = routes.get(scored.answered_by) or next(iter(routes.values()))
        return dataclasses.replace(scored, api=answered.dialect.api, scale=scale or PROBABILITY)

    async def _score(self, batcher: MicroBatcher, config: RerankerConfig, query: str, documents: Sequence[str],
                     deadline: float) -> RerankResult:
        query_chars, doc_chars = config.max_query_chars, config.max_doc_chars  # the batcher leaves blank texts out
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

    def _batcher(self, config: RerankerConfig, routes: dict[str, Route], endpoints: dict[str, Endpoint], *,
                 to_probability: bool) -> MicroBatcher:
        """The batcher of the replicas with a known route, each its own dialect (probabilities if scales differ)."""

        def members() -> Members:
            # routes are cached without the instruction: bind this call's to the dialect that sends it
            bound = {url: dataclasses.replace(route, dialect=route.dialect.with_instruction(config.instruction))
                     for url, route in routes.items()}
            replicas = [Replica(url, endpoints[url].state, self._sender(route, config, to_probability))
                        for url, route in bound.items()]
            dialects = [route.dialect for route in bound.values()]
            return (replicas, all(d.mixes_queries for d in dialects),
                    max(1, min(config.max_pairs_per_request, *(d.max_pairs for d in dialects))))

        bound_to = [(url, route, endpoints[url].state) for url, route in routes.items()]
        return self._registry.group(config, to_probability, bound_to, members)

    def _sender(self, route: Route, config: RerankerConfig, to_probability: bool):  # type: ignore[no-untyped-def]
        transport, dialect, tls, api_key = self._transport, route.dialect, tls_of(config), config.api_key

        async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
            scores: list[float] = []
            for n, part in enumerate(token_parts(batch, dialect.max_request_tokens)):  # one unless a token cap splits
                if n:  # the dispatch step counted the first, with every pair of the batch
                    self._on_part_sent()
                answer = await transport.send(route.endpoint, dialect.build(part, route.model), deadline=deadline,
                                              api_key=api_key, tls=tls, may_resend=may_resend)
                scores += read_answer(dialect.parse, answer, part)
            return normalize(scores, route.scale) if to_probability else scores

        return send


def _detection(config: RerankerConfig, deadline: float = 0.0, endpoint: Endpoint | None = None) -> Detection:
    return Detection(tuple(getattr(config, name) for name in ROUTE_FIELDS), config, deadline, endpoint)


class RouteBook:
    def __init__(self, transport: HttpTransport, on_detection: Callable[[], None] = lambda: None, *,
                 clock: Callable[[], float] = clock.now) -> None:
        self._transport, self._clock = transport, clock  # ``clock``: the service's, which a route's age is read on
        self._on_detection = on_detection  # counted: detections that keep coming say health is forgotten
        self._detect = alru_cache(maxsize=128)(self._detect_uncached)
        self._running: dict[tuple[object, ...], Detection] = {}  # key -> the detection under way
        # every detection still running, forgotten ones too (the cache no longer holds those): closed with the book
        self._tasks: set[asyncio.Task[KnownRoute]] = set()
        self._checks: set[asyncio.Task[Route | None]] = set()  # known routes being checked again: closed with the book

    @property
    def cached(self) -> int:
        return self._detect.cache_info().currsize

    @property
    def running(self) -> int:  # each ends by its deadline at the latest
        return len(self._running) + len(self._checks)

    async def routes(self, config: RerankerConfig, deadline: float, endpoints: Sequence[Endpoint]) -> dict[str, Route]:
        """The known routes of ``endpoints`` (at least one), detecting the others; waits only while none is known.
        Raises the first replica's error when none works."""
        detections = [_detection(config.replicas[e.url], deadline, e) for e in endpoints]
        # One shared with an earlier caller runs to that caller's deadline: leave it at ours.
        outlasts_us = any(d.key in self._running and self._running[d.key].deadline > deadline for d in detections)
        routes: dict[str, Route] = {}
        errors: dict[str, BaseException] = {}
        tasks: dict[asyncio.Task[KnownRoute], str] = {}
        for detection, endpoint in zip(detections, endpoints, strict=True):
            endpoint.route_keys.add(detection.key)  # its breaker opening forgets the route, however read
            if self._detect.cache_contains(detection) and detection.key not in self._running:
                # a finished detection: its result comes back without a task or a wait
                try:
                    known = await self._detect(detection)
                except Exception as exc:  # a failed one not yet evicted from the cache
                    errors[endpoint.url] = exc
                    continue
                routes[endpoint.url] = known.route
                if not known.checking and self._clock() - known.checked_at >= DETECTION_TTL_S:
                    self._check_again(detection, known)
            else:
                tasks[self._detection_task(detection)] = endpoint.url
        pending = set(tasks)
        while pending and not routes:
            timeout = max(0.0, deadline - clock.now()) if outlasts_us else None
            done, pending = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                raise DeadlineExceeded("no replica's API was known before the deadline (detection still running)")
            for task in done:
                if task.cancelled():
                    errors[tasks[task]] = RerankError("detection was cancelled")
                elif (error := task.exception()) is not None:
                    errors[tasks[task]] = error
                else:
                    routes[tasks[task]] = task.result().route
        if not routes:
            raise next(errors[e.url] for e in endpoints if e.url in errors)
        return {e.url: routes[e.url] for e in endpoints if e.url in routes}

    def forget(self, config: RerankerConfig) -> None:
        """Every replica's cached route (a status said a route no longer holds, or a probe failed)."""
        for url in config.endpoints:
            self._forget_key(_detection(config.replicas[url]).key)

    async def forget_refused(self, config: RerankerConfig, refused: Mapping[str, Route]) -> None:
        """Forget each refused route still known: the recalls it refused later join the one detection again."""
        await self._on_known(config, refused, lambda key, known: self._forget_key(key))

    async def cap(self, config: RerankerConfig, routes: Mapping[str, Route], limit: int) -> None:
        """Each of ``routes`` still known sends at most ``limit`` texts a request from now on, a check of it too."""
        await self._on_known(config, routes, lambda key, known: known.cap(limit))

    async def _on_known(self, config: RerankerConfig, routes: Mapping[str, Route],
                        act: Callable[[tuple[object, ...], KnownRoute], None]) -> None:
        for url, route in routes.items():
            detection = _detection(config.replicas[url])
            if detection.key not in self._running and self._detect.cache_contains(detection):
                with contextlib.suppress(Exception):  # a failed detection again, not yet evicted: not that route
                    if (known := await self._detect(detection)).route is route:
                        act(detection.key, known)

    def forget_endpoint(self, endpoint: Endpoint) -> None:
        """The endpoint's breaker opened: when the server is back, detect again (it may be another now)."""
        for key in endpoint.route_keys:
            self._forget_key(key)
        endpoint.route_keys.clear()

    def _forget_key(self, key: tuple[object, ...]) -> None:
        self._detect.cache_invalidate(Detection(key, RerankerConfig()))
        self._running.pop(key, None)

    async def close(self) -> None:
        """Stop every detection and check, even those forgotten: none may send after the transport closed."""
        await self._detect.cache_close()
        await cancel_and_wait([*self._tasks, *self._checks])

    def _detection_task(self, detection: Detection) -> asyncio.Task[KnownRoute]:
        """A task of its own, so a caller who leaves does not cancel a detection others may share."""
        if not self._detect.cache_contains(detection):  # this call starts it (or joins one just started)
            # marked here, not in its first step: later callers of a burst must read the first one's deadline
            self._running.setdefault(detection.key, detection)
        task = asyncio.ensure_future(self._detect(detection))
        task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        return task

    def _check_again(self, detection: Detection, known: KnownRoute) -> None:
        """Only while its breaker is closed."""
        if detection.endpoint is None or (state := detection.endpoint.state).breaker.state != "closed":
            return
        known.checking = True
        task = asyncio.ensure_future(recheck(resolve_route, self._transport, detection, state, self._on_detection))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)
        task.add_done_callback(lambda done: known.checked(None if done.cancelled() else done.result(), self._clock()))

    async def _detect_uncached(self, detection: Detection) -> KnownRoute:
        assert detection.endpoint is not None
        state = detection.endpoint.state
        self._running[detection.key] = detection
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return KnownRoute(await detect(resolve_route, self._transport, detection, state, self._on_detection),
                              self._clock())
        finally:  # a detection forgotten (cancelled) may end after its successor began: clear only its own mark
            self._tasks.discard(task)
            if self._running.get(detection.key) is detection:
                del self._running[detection.key]
