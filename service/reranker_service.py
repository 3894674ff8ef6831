"""The composition root on the owner loop: config -> endpoint -> route -> batcher -> ranking.

It is the fail-safe boundary: ``rerank`` returns the ranking or None and records why, and nothing
but cancellation leaves it. Detection results are cached per endpoint, API mode, model, key,
instruction and TLS settings (async-lru, with a TTL; concurrent identical detections share one run)
and forgotten when the endpoint starts failing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from async_lru import alru_cache

from ..batching.batcher import MicroBatcher
from ..batching.breaker import CircuitBreaker
from ..batching.limiter import EndpointLimiter
from ..core.config import RerankerConfig
from ..core.dialects import ScoreBatch
from ..core.errors import (
    BreakerOpen,
    DeadlineExceeded,
    DetectionFailed,
    InputTooLong,
    RerankError,
    ServerError,
    TransportError,
)
from ..core.probe_report import ProbeReport
from ..core.ranking import cut_head, ranked, tighter_limits
from ..core.redaction import redact
from ..core.statistics import CountOnce, RerankerStatistics, StatsRecorder
from .detection import Route, probe_endpoint, resolve_route, tls_of
from .transport import HttpTransport

log = logging.getLogger("a0_reranker")

DETECTION_TTL_S: Final = 600.0
_BREAKER_SEVERITY: Final = {"closed": 0, "half_open": 1, "open": 2}  # status shows an endpoint's worst breaker
ABANDON_TOLERANCE_S: Final = 0.005  # a cancellation this close to the deadline is the caller abandoning at it
Ranking = list[tuple[int, float]]


@dataclass(frozen=True)
class RerankResult:
    """A rerank's outcome: the ranking, or None with the fallback reason and its message."""

    ranking: Ranking | None
    api: str = ""
    reason: str = ""
    message: str = ""


@dataclass
class _Endpoint:
    limiter: EndpointLimiter
    breaker: CircuitBreaker


class RerankService:
    """Use from the owner loop only (the runtime module is how other threads and loops reach it)."""

    def __init__(self, stats: StatsRecorder, transport: HttpTransport | None = None) -> None:
        self._stats = stats
        self._transport = transport or HttpTransport()
        self._endpoints: dict[tuple[str, str], _Endpoint] = {}
        self._batchers: dict[tuple[str, ...], MicroBatcher] = {}
        self._detect = alru_cache(maxsize=128, ttl=DETECTION_TTL_S)(self._detect_uncached)

    async def rerank(
        self, query: str, documents: Sequence[str], config: RerankerConfig, deadline: float,
        ticket: CountOnce | None = None,
    ) -> RerankResult:
        """Best-first ``(index, score)`` pairs, or no ranking with the reason counted. Never raises.

        With a ``ticket`` the outcome is counted only if the caller has not already given up and
        counted a timeout itself (see ``CountOnce``).
        """
        started = time.monotonic()
        self._stats.rerank_started()
        try:
            ranking, api = await self._rerank(query, documents, config, deadline)
        except RerankError as exc:
            return self._fallback(exc.reason, _masked(str(exc), config, query, documents), ticket)
        except Exception as exc:
            log.exception("a0_reranker: unexpected error while reranking (recall keeps its stock order)")
            return self._fallback("error", f"unexpected error: {type(exc).__name__}", ticket)
        if ticket is None or ticket.claim():
            self._stats.rerank_succeeded(time.monotonic() - started, api)
        return RerankResult(ranking, api=api)

    async def probe(self, config: RerankerConfig, deadline: float) -> ProbeReport:
        """A live connection test that bypasses the detection cache (a fixed URL tests right at once)."""
        report = await probe_endpoint(self._transport, config, deadline)
        if not report.ok:
            self._forget_route(config)
        return report.redacted(config.api_key)

    def live_state(self) -> dict[str, object]:
        breakers: dict[str, str] = {}
        for (endpoint, _), ep in self._endpoints.items():  # one entry per endpoint, whatever the keys
            state = ep.breaker.state
            if _BREAKER_SEVERITY[state] > _BREAKER_SEVERITY.get(breakers.get(endpoint, ""), -1):
                breakers[endpoint] = state
        return {
            "breakers": breakers,
            "queued_pairs": sum(b.queued_pairs for b in self._batchers.values()),
            "in_flight": sum(ep.limiter.in_flight for ep in self._endpoints.values()),
        }

    def statistics(self) -> RerankerStatistics:
        return self._stats.snapshot(**self.live_state())  # type: ignore[arg-type]

    async def close(self) -> None:
        for batcher in self._batchers.values():
            await batcher.close()
        self._batchers.clear()
        await self._transport.close()

    # --- the rerank path ---------------------------------------------------------------------

    async def _rerank(
        self, query: str, documents: Sequence[str], config: RerankerConfig, deadline: float
    ) -> tuple[Ranking, str]:
        if not documents:
            return [], ""
        endpoint = self._endpoint(config)
        was_half_open = endpoint.breaker.state == "half_open"
        if not endpoint.breaker.allow():
            raise BreakerOpen("the reranker failed repeatedly; skipping it until the breaker's next probe")
        try:
            route = await self._route(config, deadline, endpoint)
            scores = await self._score(route, endpoint, query, documents, config, deadline)
        except (TransportError, ServerError, DetectionFailed) as exc:
            if _endpoint_is_failing(exc):
                self._forget_route(config)
            raise
        finally:
            if was_half_open:
                endpoint.breaker.release_probe()  # no-op once the probe's request recorded its outcome
        return ranked(scores), route.dialect.api

    async def _score(
        self, route: Route, endpoint: _Endpoint, query: str, documents: Sequence[str],
        config: RerankerConfig, deadline: float,
    ) -> list[float]:
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

    async def _route(self, config: RerankerConfig, deadline: float, endpoint: _Endpoint) -> Route:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded("no time left to detect the reranker API")
        try:
            return await asyncio.wait_for(self._detect(*_detection_key(config)), remaining)
        except TimeoutError:
            # A silent server counts against the breaker here too: otherwise one that hangs from the
            # start (nothing detected yet) would cost every recall the whole timeout, for ever.
            endpoint.breaker.record_failure()
            raise DeadlineExceeded("detecting the reranker API took longer than the timeout") from None
        except (DetectionFailed, TransportError, DeadlineExceeded):
            endpoint.breaker.record_failure()
            raise
        except asyncio.CancelledError:
            if time.monotonic() >= deadline - ABANDON_TOLERANCE_S:  # the caller gave up at the deadline
                endpoint.breaker.record_failure()
            raise

    async def _detect_uncached(self, *key: object) -> Route:
        config = _config_from_key(key)
        return await resolve_route(self._transport, config, time.monotonic() + config.timeout)

    def _forget_route(self, config: RerankerConfig) -> None:
        self._detect.cache_invalidate(*_detection_key(config))

    def _endpoint(self, config: RerankerConfig) -> _Endpoint:
        key = (config.endpoint, config.key_fingerprint)
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            endpoint = _Endpoint(
                EndpointLimiter(config.max_concurrency),
                CircuitBreaker(failures=config.breaker_failures, cooldown=config.breaker_cooldown),
            )
            self._endpoints[key] = endpoint
        else:
            endpoint.limiter.resize(config.max_concurrency)
            endpoint.breaker.configure(failures=config.breaker_failures, cooldown=config.breaker_cooldown)
        return endpoint

    def _batcher(self, route: Route, config: RerankerConfig, endpoint: _Endpoint) -> MicroBatcher:
        dialect = route.dialect
        key = (config.endpoint, config.api_key, str(config.tls_verify), config.ca_bundle, dialect.name,
               dialect.path, route.model, config.instruction if dialect.mixes_queries else "")
        max_pairs = max(1, min(config.max_pairs_per_request, dialect.max_pairs))
        window = config.batch_window_ms / 1000.0
        batcher = self._batchers.get(key)
        if batcher is None:
            batcher = MicroBatcher(
                self._sender(route, config), limiter=endpoint.limiter, breaker=endpoint.breaker,
                stats=self._stats, mixes_queries=dialect.mixes_queries, max_pairs=max_pairs,
                window=window, max_queued_pairs=config.max_queued_pairs,
            )
            self._batchers[key] = batcher
        else:
            batcher.configure(max_pairs=max_pairs, window=window, max_queued_pairs=config.max_queued_pairs)
        return batcher

    def _sender(self, route: Route, config: RerankerConfig):  # type: ignore[no-untyped-def]
        transport, dialect, tls, api_key = self._transport, route.dialect, tls_of(config), config.api_key

        async def send(batch: ScoreBatch, deadline: float) -> list[float]:
            request = dialect.build(batch, route.model)
            answer = await transport.send(route.endpoint, request, deadline=deadline, api_key=api_key, tls=tls)
            return dialect.parse(answer, batch)

        return send

    def _fallback(self, reason: str, text: str, ticket: CountOnce | None) -> RerankResult:
        """Count a fallback (``text`` is already masked) unless the caller counted its own timeout."""
        if ticket is None or ticket.claim():
            self._stats.fallback(reason, text)
            log.debug("a0_reranker: fallback to the stock order (%s): %s", reason, text)
        return RerankResult(None, reason=reason, message=text)


def _masked(message: str, config: RerankerConfig, query: str, documents: Sequence[str]) -> str:
    """Error text without the key, the query or any document: servers quote what they refused, and this
    text goes to the log and the status panel, which must not carry memory contents."""
    return redact(message, config.api_key, query, *documents)


# Statuses that say the route itself no longer holds (the API moved, the key or the model changed).
# Not 5xx in general: an overloaded or crashing server still speaks the same API, and forgetting the
# route there makes every waiting recall re-run detection against that server, which then fails too.
_ROUTE_GONE_STATUSES: Final = frozenset({401, 403, 404, 405, 501})


def _endpoint_is_failing(exc: RerankError) -> bool:
    """Errors that suggest the detected route no longer holds (not: a bad input, a slow answer, an
    overloaded server)."""
    if isinstance(exc, InputTooLong):
        return False
    if isinstance(exc, ServerError):
        return exc.status in _ROUTE_GONE_STATUSES
    return True


_KEY_FIELDS: Final = ("endpoint", "api", "model", "api_key", "instruction", "tls_verify", "ca_bundle", "timeout")


def _detection_key(config: RerankerConfig) -> tuple[object, ...]:
    return tuple(getattr(config, name) for name in _KEY_FIELDS)


def _config_from_key(key: tuple[object, ...]) -> RerankerConfig:
    return RerankerConfig(**dict(zip(_KEY_FIELDS, key, strict=True)))  # type: ignore[arg-type]
