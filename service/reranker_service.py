"""The composition root on the owner loop: config -> endpoint -> route -> batcher -> ranking.

It is the fail-safe boundary: ``rerank`` returns the ranking or None and records why, and nothing
but cancellation leaves it. Detection results are cached per endpoint, API mode, model, key and TLS
settings (async-lru, with a TTL; concurrent identical detections share one run). A detection runs to
its own end even when its callers leave (its deadline bounds it), so that a server which never
answers is counted against the breaker and a server which answers late is remembered. Routes are
forgotten when the breaker opens or a status says the route is gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from async_lru import alru_cache

from ..batching.batcher import MicroBatcher, Scored
from ..core.answer_boundary import read_answer
from ..core.config import RerankerConfig
from ..core.dialects import ScoreBatch
from ..core.errors import BreakerOpen, InputTooLong, RateLimited, RerankError, ServerError
from ..core.probe_report import ProbeReport
from ..core.ranking import cut_head, ranked, sent_texts, tighter_limits
from ..core.redaction import shown
from ..core.scores import PROBABILITY, ScoreScale
from ..core.statistics import CountOnce, RerankerStatistics, StatsRecorder
from .detection import Route, probe_endpoint, resolve_route, tls_of
from .endpoints import Endpoint, EndpointRegistry
from .transport import HttpTransport

log = logging.getLogger("a0_reranker")

DETECTION_TTL_S: Final = 600.0
RATE_LIMIT_DEFAULT_S: Final = 1.0  # a 429 during detection without Retry-After holds the endpoint this long
Ranking = list[tuple[int, float]]


@dataclass(frozen=True)
class RerankResult:
    """A rerank's outcome: the ranking, or None with the fallback reason and its message."""

    ranking: Ranking | None
    api: str = ""
    reason: str = ""
    message: str = ""
    retries: int = 0  # requests sent again before the ranking came
    scale: ScoreScale = PROBABILITY  # what the ranking's scores are (core.scores puts them on one scale)


_KEY_FIELDS: Final = ("endpoint", "api", "model", "api_key", "tls_verify", "ca_bundle")


@dataclass(frozen=True)
class _Detection:
    """One detection's arguments; equal (and cached together) when only the deadline or the other
    settings differ, which do not change the answer."""

    key: tuple[object, ...]
    config: RerankerConfig = dataclasses.field(compare=False)
    deadline: float = dataclasses.field(compare=False, default=0.0)
    endpoint: Endpoint | None = dataclasses.field(compare=False, default=None)

    @classmethod
    def of(cls, config: RerankerConfig, deadline: float = 0.0, endpoint: Endpoint | None = None) -> _Detection:
        return cls(tuple(getattr(config, name) for name in _KEY_FIELDS), config, deadline, endpoint)


class RerankService:
    """Use from the owner loop only (the runtime module is how other threads and loops reach it)."""

    def __init__(self, stats: StatsRecorder, transport: HttpTransport | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._stats = stats
        self._transport = transport or HttpTransport()
        self._registry = EndpointRegistry(stats, clock=clock, on_open=self._forget_routes)
        self._detect = alru_cache(maxsize=128, ttl=DETECTION_TTL_S)(self._detect_uncached)

    async def rerank(
        self, query: str, documents: Sequence[str], config: RerankerConfig, deadline: float,
        ticket: CountOnce | None = None,
    ) -> RerankResult:
        """Best-first ``(index, score)`` pairs, or no ranking with the reason counted. Never raises
        but cancellation (counted as such). With a ``ticket`` an outcome is counted only if the
        caller has not already given up and counted a timeout itself (see ``CountOnce``)."""
        started = time.monotonic()
        self._stats.rerank_started()
        try:
            ranking, api, retries, scale = await self._rerank(query, documents, config, deadline)
        except RerankError as exc:
            return self._fallback(exc.reason, _masked(str(exc), config, query, documents), ticket)
        except asyncio.CancelledError:
            if ticket is None or ticket.claim():
                self._stats.rerank_cancelled()
            raise
        except Exception as exc:
            log.exception("a0_reranker: unexpected error while reranking (recall keeps its stock order)")
            return self._fallback("error", f"unexpected error: {type(exc).__name__}", ticket)
        if ticket is None or ticket.claim():
            self._stats.rerank_succeeded(time.monotonic() - started, api, retried=retries > 0)
        return RerankResult(ranking, api=api, retries=retries, scale=scale)

    async def probe(self, config: RerankerConfig, deadline: float) -> ProbeReport:
        """A live connection test that bypasses the detection cache (a fixed URL tests right at once)."""
        report = await probe_endpoint(self._transport, config, deadline)
        if not report.ok:
            self._detect.cache_invalidate(_Detection.of(config))
        return report.redacted(config.api_key)

    def live_state(self) -> dict[str, object]:
        return self._registry.live_state()

    def footprint(self) -> dict[str, int]:
        """Per-configuration state kept, and detections cached (bounded whatever the settings do)."""
        return {**self._registry.footprint(), "detections": self._detect.cache_info().currsize}

    def statistics(self) -> RerankerStatistics:
        return self._stats.snapshot(**self.live_state())  # type: ignore[arg-type]

    async def close(self) -> None:
        await self._registry.close()
        await self._detect.cache_close()
        await self._transport.close()

    # --- the rerank path ---------------------------------------------------------------------

    async def _rerank(
        self, query: str, documents: Sequence[str], config: RerankerConfig, deadline: float
    ) -> tuple[Ranking, str, int, ScoreScale]:
        if not documents:
            return [], "", 0, PROBABILITY
        endpoint = self._registry.endpoint(config)
        if not endpoint.state.breaker.would_admit():
            raise BreakerOpen("the reranker failed repeatedly; skipping it until the breaker's next probe")
        if endpoint.state.not_before >= deadline:
            raise RateLimited(429, "the server asked us to wait (Retry-After) past this recall's deadline")
        route = await self._route(config, deadline, endpoint)  # cached without the instruction: bind this call's
        route = dataclasses.replace(route, dialect=route.dialect.with_instruction(config.instruction))
        try:
            scored = await self._score(route, endpoint, query, documents, config, deadline)
        except ServerError as exc:
            if exc.status in _ROUTE_GONE_STATUSES:
                self._detect.cache_invalidate(_Detection.of(config))
            raise
        return ranked(scored.scores), route.dialect.api, scored.retries, route.scale

    async def _score(
        self, route: Route, endpoint: Endpoint, query: str, documents: Sequence[str],
        config: RerankerConfig, deadline: float,
    ) -> Scored:
        batcher = self._batcher(route, config, endpoint)
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

    async def _route(self, config: RerankerConfig, deadline: float, endpoint: Endpoint) -> Route:
        """The cached route, or a detection that goes on (bounded by its deadline) if this caller leaves."""
        detection = _Detection.of(config, deadline, endpoint)
        endpoint.route_keys.add(detection.key)
        return await asyncio.shield(self._detect(detection))

    async def _detect_uncached(self, detection: _Detection) -> Route:
        assert detection.endpoint is not None
        state = detection.endpoint.state
        await state.wait_out_retry_after(detection.deadline)
        permit = state.breaker.admit()  # detection is an attempt too: a probe while half-open
        if permit is None:
            raise BreakerOpen("the reranker failed repeatedly; skipping it until the breaker's next probe")
        try:
            with permit:
                return await resolve_route(self._transport, detection.config, detection.deadline)
        except RateLimited as exc:
            wait = exc.retry_after if exc.retry_after is not None else RATE_LIMIT_DEFAULT_S
            state.hold_off(time.monotonic() + wait)
            raise

    def _forget_routes(self, endpoint: Endpoint) -> None:
        """The breaker opened: when the server is back, detect again (it may be another server now)."""
        for key in endpoint.route_keys:
            self._detect.cache_invalidate(_Detection(key, RerankerConfig()))
        endpoint.route_keys.clear()

    def _batcher(self, route: Route, config: RerankerConfig, endpoint: Endpoint) -> MicroBatcher:
        dialect = route.dialect
        key = (str(config.tls_verify), config.ca_bundle, dialect.name, dialect.path, route.model, dialect.instruction)
        max_pairs = max(1, min(config.max_pairs_per_request, dialect.max_pairs))
        return self._registry.batcher(endpoint, key, config, mixes_queries=dialect.mixes_queries,
                                      max_pairs=max_pairs, send=lambda: self._sender(route, config))

    def _sender(self, route: Route, config: RerankerConfig):  # type: ignore[no-untyped-def]
        transport, dialect, tls, api_key = self._transport, route.dialect, tls_of(config), config.api_key

        async def send(batch: ScoreBatch, deadline: float, fresh: bool) -> list[float]:
            request = dialect.build(batch, route.model)
            answer = await transport.send(route.endpoint, request, deadline=deadline, api_key=api_key, tls=tls,
                                          fresh=fresh)
            return read_answer(dialect.parse, answer, batch)

        return send

    def _fallback(self, reason: str, text: str, ticket: CountOnce | None) -> RerankResult:
        """Count a fallback (``text`` is already masked) unless the caller counted its own timeout."""
        if ticket is None or ticket.claim():
            self._stats.fallback(reason, text)
            log.debug("a0_reranker: fallback to the stock order (%s): %s", reason, text)
        return RerankResult(None, reason=reason, message=text)


def _masked(message: str, config: RerankerConfig, query: str, documents: Sequence[str]) -> str:
    """Error text without the key, the query or any document, as given or as cut when sent: servers quote
    what they refused, and this text goes to the log and the status panel, which must not carry memory
    contents."""
    texts = sent_texts(query, documents, config.max_query_chars, config.max_doc_chars)
    return shown(message, config.api_key, *texts)


# Statuses that say the route itself no longer holds (the API moved, the key or the model changed).
# Not 5xx: an overloaded or crashing server still speaks the same API, and forgetting the route there
# makes every waiting recall re-run detection against that server, which then fails too.
_ROUTE_GONE_STATUSES: Final = frozenset({401, 403, 404, 405, 501})
