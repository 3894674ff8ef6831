"""What the service keeps between recalls (on the owner loop only), built from the settings and bounded:
each server's state, each replica's detected route, and the route groups a call goes to.

One ``Endpoint`` per base URL, API key and the settings its state is built from: its dispatch state and
the server's health as this key sees it (a 401 or a per-key rate limit says nothing of it for another
key). One group per route: the replicas of one model with the settings a batcher is built from. Nothing
is reconfigured in place: changed settings get new state, and the old drains and is forgotten like any
idle entry. Both are bounded: endpoints forget first the least recently used whose health holds nothing
worth keeping (a server that is down keeps its open breaker); groups forget idle batchers past the bound.

Routes (``RouteBook``) are detected per replica and cached (async-lru with a TTL; identical detections
share one run). A detection is an attempt like any other: it asks the breaker for a permit and waits out
a Retry-After, and runs to its own end even when its callers leave, so a silent server is counted
against the breaker and a late answer is remembered. A call waits only while no replica's route is
known; a known route is read without a task or a turn of the loop, so a burst reaches its queue together.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from async_lru import alru_cache

from ..batching.batcher import MicroBatcher
from ..batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from ..batching.dispatch import Dispatch, DispatchEvents, DispatchPolicy, ReplicaSet
from ..batching.endpoint_state import EndpointState, Replica
from ..batching.queue import EndpointLimiter
from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.errors import DeadlineExceeded, RateLimited, RerankError
from ..core.statistics import ReplicaStatistics
from .detection import Route, resolve_route
from .transport import HttpTransport

MAX_ENDPOINTS: Final = 256  # pairs of server and key: 16 replicas for each of 16 agent profiles' keys
MAX_GROUPS: Final = 32
DETECTION_TTL_S: Final = 600.0
RATE_LIMIT_DEFAULT_S: Final = 1.0  # a 429 during detection without Retry-After holds the endpoint this long
_ROUTE_FIELDS: Final = ("endpoint", "api", "model", "api_key", "tls_verify", "ca_bundle")
# What a group's batcher, replica set and dispatch step are built from (not the timeout, which each call
# brings, nor what only the recall path reads).
_GROUP_FIELDS: Final = ("endpoints", "key_fingerprint", "tls_verify", "ca_bundle", "model", "api", "instruction",
                        "max_pairs_per_request", "batch_window_ms", "max_queued_pairs", "shed_overload",
                        "retry_budget", "max_retries", "hedging", "hedge_delay_ms")
_SEVERITY: Final = {"closed": 0, "half_open": 1, "open": 2}  # status shows an endpoint's worst breaker


@dataclass(eq=False)
class Endpoint:
    url: str
    state: EndpointState
    route_keys: set[tuple[object, ...]] = field(default_factory=set)  # detection entries made through it


@dataclass(eq=False)
class _Group:
    batcher: MicroBatcher
    bound_to: tuple[object, ...]  # the routes and endpoint states its key names by identity: kept alive


@dataclass(frozen=True)
class Members:
    """What a group's batcher is built from: the replicas with a route, and what their dialects allow."""

    replicas: Sequence[Replica]
    mixes_queries: bool
    max_pairs: int


def breaker_policy(config: RerankerConfig) -> BreakerPolicy:
    return BreakerPolicy(consecutive=config.breaker_failures, failure_rate=config.breaker_failure_rate,
                         cooldown=config.breaker_cooldown)


class EndpointRegistry:
    def __init__(self, events: DispatchEvents, *, clock: Callable[[], float] = clock.now,
                 on_open: Callable[[Endpoint], None] = lambda endpoint: None,
                 max_endpoints: int = MAX_ENDPOINTS, max_groups: int = MAX_GROUPS) -> None:
        self._events, self._clock, self._on_open = events, clock, on_open
        self._max_endpoints, self._max_groups = max_endpoints, max_groups
        self._endpoints: OrderedDict[tuple[object, ...], Endpoint] = OrderedDict()
        self._groups: OrderedDict[Hashable, _Group] = OrderedDict()

    def endpoint(self, config: RerankerConfig, url: str) -> Endpoint:
        """The state of the server at ``url`` as these settings see it (created on first use). Room is
        made by forgetting the least recently used endpoint with nothing worth keeping, or failing that
        the least recently used idle one: a group still naming it is another group from the next call on
        (see ``group``); idle, the old one holds no slot."""
        key = (url, config.key_fingerprint, config.max_concurrency, breaker_policy(config))
        found = self._endpoints.get(key)
        if found is not None:
            self._endpoints.move_to_end(key)
            return found
        _forget(self._endpoints, self._max_endpoints - 1, lambda e: e.state.forgettable, lambda e: e.state.idle)
        breaker = CircuitBreaker(breaker_policy(config), clock=self._clock, on_open=lambda: self._on_open(made))
        made = self._endpoints[key] = Endpoint(url, EndpointState(EndpointLimiter(config.max_concurrency), breaker))
        return made

    def group(self, config: RerankerConfig, to_probability: bool, bound_to: Sequence[tuple[str, object, object]],
              members: Callable[[], Members]) -> MicroBatcher:
        """The batcher for these settings and for the routes and endpoint states in ``bound_to`` (url,
        route, state), built from ``members()`` the first time; a route detected again, or an endpoint
        made anew, is another group. A warm recall with the same settings builds nothing."""
        key = (*(getattr(config, name) for name in _GROUP_FIELDS), to_probability,
               *((url, id(route), id(state)) for url, route, state in bound_to))
        group = self._groups.get(key)
        if group is None:
            _forget(self._groups, self._max_groups - 1, lambda g: g.batcher.idle)
            group = self._groups[key] = _Group(self._new_batcher(config, members()), tuple(bound_to))
        else:
            self._groups.move_to_end(key)
        return group.batcher

    def _new_batcher(self, config: RerankerConfig, members: Members) -> MicroBatcher:
        replicas = ReplicaSet(members.replicas, budget=RetryBudget(ratio=config.retry_budget, clock=self._clock))
        policy = DispatchPolicy(max_retries=config.max_retries, hedge=config.hedging,
                                hedge_delay_s=config.hedge_delay_ms / 1000.0 if config.hedge_delay_ms > 0 else None)
        return MicroBatcher(
            Dispatch(replicas, self._events, policy), mixes_queries=members.mixes_queries,
            max_pairs=members.max_pairs, window=config.batch_window_ms / 1000.0,
            max_queued_pairs=config.max_queued_pairs, shed=config.shed_overload, on_idle=self._trim_groups)

    def _trim_groups(self) -> None:
        """A batcher went idle: keep the groups within their bound now, not when the next one is made."""
        _forget(self._groups, self._max_groups, lambda g: g.batcher.idle)

    def live_state(self) -> dict[str, object]:
        latest = {key[:2]: e for key, e in self._endpoints.items()}  # per URL and key: the settings last used
        breakers: dict[str, str] = {}
        for endpoint in latest.values():  # one entry per URL, the worst of its keys
            state = endpoint.state.breaker.state
            if _SEVERITY[state] > _SEVERITY.get(breakers.get(endpoint.url, ""), -1):
                breakers[endpoint.url] = state
        by_url: dict[str, list[EndpointState]] = {}  # replicas: one entry per server URL, all its keys together
        for endpoint in self._endpoints.values():
            by_url.setdefault(endpoint.url, []).append(endpoint.state)
        total = sum(e.state.pairs_sent for e in self._endpoints.values()) or 1
        return {
            "breakers": breakers,
            "queued_pairs": sum(group.batcher.queued_pairs for group in self._groups.values()),
            "in_flight": sum(e.state.limiter.in_flight for e in self._endpoints.values()),
            "replicas": tuple(_replica_statistics(url, breakers[url], states, total) for url, states in by_url.items()),
        }

    def footprint(self) -> dict[str, int]:
        """How much per-configuration state is kept (tests check that it stays bounded)."""
        return {"endpoints": len(self._endpoints), "batchers": len(self._groups)}

    async def close(self) -> None:
        for group in self._groups.values():
            await group.batcher.close()
        self._groups.clear()
        self._endpoints.clear()


def _replica_statistics(url: str, breaker: str, states: list[EndpointState], total: int) -> ReplicaStatistics:
    pairs = sum(s.pairs_sent for s in states)
    measured = [s for s in states if s.seconds_per_request is not None]
    latency = max((s.seconds_per_request or 0.0) for s in measured) * 1000 if measured else None
    per_pair = max((s.seconds_per_pair or 0.0) for s in measured) * 1000 if measured else None
    return ReplicaStatistics(url=url, breaker=breaker, pairs=pairs, share=pairs / total,
                             in_flight=sum(s.limiter.in_flight for s in states), latency_ms=latency,
                             ms_per_pair=per_pair)


K = TypeVar("K")
V = TypeVar("V")


def _forget(entries: OrderedDict[K, V], keep: int, *tests: Callable[[V], bool]) -> None:
    """Forget entries, least recently used first, until at most ``keep`` are left: those that pass the
    first test, then, while there are still too many, those that pass the next."""
    for test in tests:
        for key in list(entries):
            if len(entries) <= keep:
                return
            if test(entries[key]):
                del entries[key]


@dataclass(frozen=True)
class _Detection:
    """One detection's arguments; equal (and cached together) when only the deadline or the other
    settings differ, which do not change the answer."""

    key: tuple[object, ...]
    config: RerankerConfig = field(compare=False)
    deadline: float = field(compare=False, default=0.0)
    endpoint: Endpoint | None = field(compare=False, default=None)

    @classmethod
    def of(cls, config: RerankerConfig, deadline: float = 0.0, endpoint: Endpoint | None = None) -> _Detection:
        return cls(tuple(getattr(config, name) for name in _ROUTE_FIELDS), config, deadline, endpoint)


class RouteBook:
    def __init__(self, transport: HttpTransport, on_detection: Callable[[], None] = lambda: None) -> None:
        self._transport = transport
        self._on_detection = on_detection  # counted: detections that keep coming say health is forgotten
        self._detect = alru_cache(maxsize=128, ttl=DETECTION_TTL_S)(self._detect_uncached)
        self._running: dict[tuple[object, ...], _Detection] = {}  # key -> the detection under way

    @property
    def cached(self) -> int:
        return self._detect.cache_info().currsize

    @property
    def running(self) -> int:  # detections under way (each ends by its deadline at the latest)
        return len(self._running)

    async def routes(self, config: RerankerConfig, deadline: float, endpoints: Sequence[Endpoint]
                     ) -> dict[str, Route]:
        """The known routes of ``endpoints`` (replica URL -> route, at least one), detecting the
        others; waits only while none is known. Raises the first replica's error when none works."""
        detections = [_Detection.of(config.for_replica(e.url), deadline, e) for e in endpoints]
        # One shared with an earlier caller runs to that caller's deadline: leave it at ours.
        outlasts_us = any(d.key in self._running and self._running[d.key].deadline > deadline for d in detections)
        routes: dict[str, Route] = {}
        errors: dict[str, BaseException] = {}
        tasks: dict[asyncio.Task[Route], str] = {}
        for detection, endpoint in zip(detections, endpoints, strict=True):
            endpoint.route_keys.add(detection.key)  # its breaker opening forgets the route, however read
            if self._detect.cache_contains(detection) and detection.key not in self._running:
                # a finished detection: its result comes back without a task or a wait
                try:
                    routes[endpoint.url] = await self._detect(detection)
                except Exception as exc:  # a failed one not yet evicted from the cache
                    errors[endpoint.url] = exc
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
                    routes[tasks[task]] = task.result()
        if not routes:
            raise next(errors[e.url] for e in endpoints if e.url in errors)
        return {e.url: routes[e.url] for e in endpoints if e.url in routes}

    def forget(self, config: RerankerConfig) -> None:
        """Every replica's cached route (a status said a route no longer holds, or a probe failed)."""
        for url in config.endpoints:
            self._detect.cache_invalidate(_Detection.of(config.for_replica(url)))

    def forget_endpoint(self, endpoint: Endpoint) -> None:
        """The endpoint's breaker opened: when the server is back, detect again (it may be another now)."""
        for key in endpoint.route_keys:
            self._detect.cache_invalidate(_Detection(key, RerankerConfig()))
        endpoint.route_keys.clear()

    async def close(self) -> None:
        await self._detect.cache_close()

    def _detection_task(self, detection: _Detection) -> asyncio.Task[Route]:
        """A task of its own, so a caller who leaves does not cancel a detection others may share."""
        if not self._detect.cache_contains(detection):  # this call starts it (or joins one just started)
            # its own mark, over a forgotten detection's still running: that one's end must not leave a
            # turn in which this one, unfinished, looks known
            self._running[detection.key] = detection
        task = asyncio.ensure_future(self._detect(detection))
        task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        return task

    async def _detect_uncached(self, detection: _Detection) -> Route:
        assert detection.endpoint is not None
        state = detection.endpoint.state
        self._running[detection.key] = detection
        try:
            await state.wait_out_retry_after(detection.deadline)
            with state.breaker.attempt():  # detection is an attempt too: a probe while half-open
                self._on_detection()
                return await resolve_route(self._transport, detection.config, detection.deadline)
        except RateLimited as exc:
            wait = exc.retry_after if exc.retry_after is not None else RATE_LIMIT_DEFAULT_S
            state.hold_off(clock.now() + wait)
            raise
        finally:  # a detection forgotten (cancelled) may end after its successor began: clear only its own mark
            if self._running.get(detection.key) is detection:
                del self._running[detection.key]
