"""What the service keeps of each server between recalls (``EndpointRegistry``, owner loop only), and the HTTP
transport, the only code that touches aiohttp.

One ``Endpoint`` per base URL, API key (a 401 or a per-key rate limit says nothing of the server for another key)
and the settings its state is built from; changed settings get new state, the old drains, leaves the status once
idle and is forgotten only for room. Redirects are refused: a POST must not become a GET elsewhere."""

from __future__ import annotations

import os
import ssl
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Final, TypeVar

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from .. import __version__
from ..batching.batcher import MicroBatcher
from ..batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from ..batching.dispatch import Dispatch, DispatchEvents, DispatchPolicy, ReplicaSet
from ..batching.endpoint_state import EndpointState, Replica
from ..batching.queue import EndpointLimiter
from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.dialects import WireAnswer, WireRequest
from ..core.errors import ConfigError, DeadlineExceeded, MalformedAnswer, RerankError, StaleConnection, TransportError
from ..core.redaction import TYPED_AUTH_SCHEME, without_url_secrets
from ..core.statistics import ReplicaStatistics
from .http_errors import proxy_refused, translate
from .proxies import PROXY_VARIABLES, Proxy, proxy_for

MAX_ENDPOINTS: Final = 256  # pairs of server and key: 16 replicas for each of 16 agent profiles' keys
MAX_GROUPS: Final = 32
# What a group's batcher, replicas and dispatch are built from (not the timeout each call brings, nor recall settings)
_GROUP_FIELDS: Final = ("endpoints", "key_fingerprint", "tls_verify", "ca_bundle", "model", "api", "instruction",
                        "max_pairs_per_request", "batch_window_ms", "max_queued_pairs", "shed_overload",
                        "retry_budget", "max_retries", "hedging", "hedge_delay_ms")
_SEVERITY: Final = {"closed": 0, "half_open": 1, "open": 2}  # status shows an endpoint's worst breaker
MAX_ANSWER_BYTES: Final = 8 * 1024 * 1024
# no cap of the connection pool's own: our slots bound what is in flight (``rerank_max_concurrency`` for each server),
# and a request waiting for a connection here would have the wait counted as its server's latency
NO_POOL_LIMIT: Final = 0
_CHUNK: Final = 64 * 1024
USER_AGENT: Final = f"a0-reranker/{__version__}"
# Idle keep-alive connections lapse before uvicorn's (vLLM, Infinity, TEI's router) and llama.cpp's 5 s: few go stale
KEEPALIVE_S: Final = 4.0


@dataclass(eq=False)
class Endpoint:
    url: str
    state: EndpointState
    route_keys: set[tuple[object, ...]] = field(default_factory=set)  # detection entries made through it


# A group's batcher is built from: the replicas with a route, whether one request may mix queries, max pairs.
Members = tuple[Sequence[Replica], bool, int]


def breaker_policy(config: RerankerConfig) -> BreakerPolicy:
    return BreakerPolicy(consecutive=config.breaker_failures, failure_rate=config.breaker_failure_rate,
                         cooldown=config.breaker_cooldown)


class EndpointRegistry:
    def __init__(self, events: DispatchEvents, *, clock: Callable[[], float] = clock.now,
                 on_open: Callable[[Endpoint], None] = lambda _: None, max_endpoints: int = MAX_ENDPOINTS) -> None:
        self._events, self._clock, self._on_open, self._max_endpoints = events, clock, on_open, max_endpoints
        self._endpoints: OrderedDict[tuple[object, ...], Endpoint] = OrderedDict()
        self._groups: OrderedDict[Hashable, MicroBatcher] = OrderedDict()

    def endpoint(self, config: RerankerConfig, url: str) -> Endpoint:
        """Made on first use; room is made by forgetting the least recently used endpoint with nothing worth
        keeping, else an idle one (a group naming it is then another)."""
        key = (url, config.key_fingerprint, config.max_concurrency, breaker_policy(config))
        found = self._endpoints.get(key)
        if found is not None:
            self._endpoints.move_to_end(key)
            return found
        # the same server and key under other settings (a changed max_concurrency or breaker): the latest kept
        previous = next((e for k, e in reversed(self._endpoints.items()) if k[:2] == key[:2]), None)
        _forget(self._endpoints, self._max_endpoints - 1, lambda e: e.state.forgettable, lambda e: e.state.idle)
        breaker = CircuitBreaker(breaker_policy(config), clock=self._clock, on_open=lambda: self._on_open(made))
        made = self._endpoints[key] = Endpoint(url, EndpointState(EndpointLimiter(config.max_concurrency), breaker))
        if previous is not None:
            made.state.carry_over(previous.state)
        return made

    def group(self, config: RerankerConfig, to_probability: bool, bound_to: Sequence[tuple[str, object, object]],
              members: Callable[[], Members]) -> MicroBatcher:
        """The batcher for these settings and ``bound_to`` (url, route, state; each equal only to itself), built
        from ``members()`` the first time: a warm recall builds nothing."""
        key = (*(getattr(config, name) for name in _GROUP_FIELDS), to_probability, *bound_to)
        batcher = self._groups.get(key)
        if batcher is None:
            _forget(self._groups, MAX_GROUPS - 1, lambda b: b.idle)
            replicas, mixes_queries, max_pairs = members()
            budget = RetryBudget(ratio=config.retry_budget, clock=self._clock)
            policy = DispatchPolicy(max_retries=config.max_retries, hedge=config.hedging,
                                    hedge_delay_s=config.hedge_delay_ms / 1000.0 if config.hedge_delay_ms > 0 else None)
            batcher = MicroBatcher(
                Dispatch(ReplicaSet(replicas, budget=budget), self._events, policy), mixes_queries=mixes_queries,
                max_pairs=max_pairs, window=config.batch_window_ms / 1000.0,
                max_queued_pairs=config.max_queued_pairs, shed=config.shed_overload, on_idle=self._trim_groups)
            self._groups[key] = batcher
        else:
            self._groups.move_to_end(key)
        return batcher

    def _trim_groups(self) -> None:  # a batcher went idle: keep the bound now, not when the next one is made
        _forget(self._groups, MAX_GROUPS, lambda b: b.idle)

    def live_state(self, shown: Collection[str] | None = None, key: str | None = None) -> dict[str, object]:
        """The servers ``shown`` (None: all kept) and any other with a request in flight. Each one's breaker is the
        viewed key's (fingerprint ``key``: a key fixed since leaves the old one's open for good), else its keys'
        worst."""
        busy = {e.url for e in self._endpoints.values() if not e.state.idle}
        listed = [(k, e) for k, e in self._endpoints.items() if shown is None or e.url in shown or e.url in busy]
        latest, breakers = dict((k[:2], e) for k, e in listed), dict[str, str]()  # server and key: latest settings
        for (url, fingerprint), e in latest.items():
            if fingerprint == key or (url, key) not in latest:
                breakers[e.url] = max(e.state.breaker.state, breakers.get(e.url, "closed"), key=_SEVERITY.__getitem__)
        by_url: dict[str, list[EndpointState]] = {}  # replicas: one entry per server URL, all its keys together
        for _, endpoint in listed:
            by_url.setdefault(endpoint.url, []).append(endpoint.state)
        total = sum(e.state.pairs_sent for _, e in listed) or 1  # shares: of the pairs sent to the servers listed
        return {
            "breakers": breakers, "queued_pairs": sum(batcher.queued_pairs for batcher in self._groups.values()),
            "in_flight": sum(e.state.limiter.in_flight for e in self._endpoints.values()),
            "replicas": tuple(_replica_statistics(url, breakers[url], states, total) for url, states in by_url.items()),
        }

    def footprint(self) -> dict[str, int]:
        return {"endpoints": len(self._endpoints), "batchers": len(self._groups)}

    async def close(self) -> None:
        groups, self._groups = list(self._groups.values()), OrderedDict()  # a batcher's close may let others run
        for batcher in groups:
            await batcher.close()
        self._endpoints.clear()


def _replica_statistics(url: str, breaker: str, states: list[EndpointState], total: int) -> ReplicaStatistics:
    """Its latency is the counters' (over their recent window): the balancer's estimate outlives a quiet spell."""
    pairs = sum(s.pairs_sent for s in states)
    return ReplicaStatistics(url=url, breaker=breaker, pairs=pairs, share=pairs / total,
                             in_flight=sum(s.limiter.in_flight for s in states))


V = TypeVar("V")


def _forget(entries: OrderedDict[Any, V], keep: int, *tests: Callable[[V], bool]) -> None:
    """Least recently used first, until ``keep`` are left: those passing each test in turn."""
    for test in tests:
        for key in list(entries):
            if len(entries) <= keep:
                return
            if test(entries[key]):
                del entries[key]


@dataclass(frozen=True)
class TlsSettings:
    verify: bool = True
    ca_bundle: str = ""


async def _on_reuse(session: object, context: SimpleNamespace, params: object) -> None:
    context.trace_request_ctx.reused = True  # the request went out on a pooled keep-alive connection


class HttpTransport:
    """Create and use it on the owner loop."""

    def __init__(self, *, on_stale_resend: Callable[[], None] = lambda: None) -> None:
        self._on_stale_resend = on_stale_resend
        self._sessions: dict[bool, aiohttp.ClientSession] = {}  # fresh -> session
        # settings -> (the CA bundle file's version read, what ``ssl`` takes): a bundle rotated in place is read again
        self._ssl_contexts: dict[TlsSettings, tuple[object, ssl.SSLContext | bool]] = {}
        self._proxies: dict[tuple[str | None, ...], Proxy] = {}  # (endpoint, proxy variables) -> its proxy
        self._closed = False

    async def send(self, endpoint: str, request: WireRequest, *, deadline: float, api_key: str = "",
                   tls: TlsSettings = TlsSettings(), may_resend: Callable[[], bool] = lambda: True) -> WireAnswer:
        """The answer, or a ``RerankError``. Sent again on a fresh connection only when its pooled one was stale
        (the server had closed it) and ``may_resend`` agrees (scoring asks its retry budget)."""
        try:
            return await self._send_once(endpoint, request, deadline, api_key, tls, fresh=False)
        except StaleConnection:
            if not may_resend():
                raise
            self._on_stale_resend()
            return await self._send_once(endpoint, request, deadline, api_key, tls, fresh=True)

    async def _send_once(self, endpoint: str, request: WireRequest, deadline: float, api_key: str,
                         tls: TlsSettings, *, fresh: bool) -> WireAnswer:
        remaining = deadline - clock.now()
        if remaining <= 0:
            raise DeadlineExceeded("no time left to send the request")
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {TYPED_AUTH_SCHEME.sub('', api_key)}"  # not "Bearer Bearer ..."
        exchange = SimpleNamespace(reused=False)  # every request on our sessions carries one
        proxy, proxy_headers = self._proxy(endpoint)
        if proxy_headers and not endpoint.startswith("https:"):  # no CONNECT: the proxy reads the request itself
            headers |= proxy_headers
        try:
            async with self._session(fresh).request(
                request.method, endpoint + request.path, json=request.body, headers=headers,
                timeout=aiohttp.ClientTimeout(total=remaining), allow_redirects=False,
                ssl=self._ssl_for(tls) if endpoint.startswith("https:") or str(proxy).startswith("https:") else True,
                trace_request_ctx=exchange, proxy=proxy, proxy_headers=proxy_headers or None,
            ) as response:
                if 300 <= response.status < 400:
                    target = without_url_secrets(response.headers.get("Location", "another address"), all_urls=True)
                    raise TransportError(f"the server redirected to {target}; set the endpoint to the address it "
                                         "redirects to", retryable=False)
                if response.status == 407:  # a forward proxy's answer to plain HTTP (to CONNECT: an exception)
                    raise proxy_refused(endpoint, 407, response.reason or "")
                body = await _read_capped(response)
                return WireAnswer(status=response.status, body=body,
                                  content_type=response.headers.get("Content-Type", ""),
                                  headers={k.lower(): v for k, v in response.headers.items()})
        except RerankError:
            raise
        except (TimeoutError, aiohttp.ClientError, HttpProcessingError, OSError) as exc:
            raise translate(exc, endpoint, remaining, reused=exchange.reused) from exc

    async def close(self) -> None:
        self._closed = True  # a request after this is refused: none opens a session nothing would close
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()

    def _proxy(self, endpoint: str) -> Proxy:
        """Chosen again only when the proxy variables change."""
        key = (endpoint, *map(os.environ.get, PROXY_VARIABLES))
        if (chosen := self._proxies.get(key)) is None:
            if len(self._proxies) >= MAX_ENDPOINTS:
                self._proxies.clear()
            chosen = self._proxies[key] = proxy_for(endpoint)
        return chosen

    def _session(self, fresh: bool) -> aiohttp.ClientSession:
        """The pooled session, or one whose every request opens its own connection."""
        if self._closed:
            raise RerankError("the reranker is shutting down")
        session = self._sessions.get(fresh)
        if session is None or session.closed:
            trace = aiohttp.TraceConfig()
            trace.on_connection_reuseconn.append(_on_reuse)
            if fresh:
                connector = aiohttp.TCPConnector(limit=NO_POOL_LIMIT, force_close=True)
            else:
                connector = aiohttp.TCPConnector(limit=NO_POOL_LIMIT, enable_cleanup_closed=True,
                                                 keepalive_timeout=KEEPALIVE_S)
            session = aiohttp.ClientSession(connector=connector, trust_env=False, trace_configs=[trace])
            self._sessions[fresh] = session
        return session

    def _ssl_for(self, tls: TlsSettings) -> ssl.SSLContext | bool:
        """The CA bundle is read again when its file changed (a CA rotated in place). Asked only for TLS (an https://
        server or proxy), so a bad bundle cannot stop plain HTTP."""
        bundle = tls.ca_bundle if tls.verify else ""
        version = _file_version(bundle) if bundle else None
        cached = self._ssl_contexts.get(tls)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            context = ssl.create_default_context(cafile=bundle) if bundle else tls.verify
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError([f"rerank_ca_bundle: cannot load {tls.ca_bundle!r}: {exc}"]) from None
        self._ssl_contexts[tls] = (version, context)
        return context


def _file_version(path: str) -> object:
    """None when it cannot be read: loading it says why."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    declared = response.content_length
    if declared is not None and declared > MAX_ANSWER_BYTES:
        raise MalformedAnswer(f"the answer is {declared} bytes, more than the {MAX_ANSWER_BYTES} read at most")
    body = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise MalformedAnswer(f"the answer is larger than the {MAX_ANSWER_BYTES} bytes read at most")
    return bytes(body)
