"""The service's per-server and per-route state, built from the settings and kept bounded.

One ``Endpoint`` per base URL, API key and the settings its state is built from (concurrency cap,
breaker thresholds): its dispatch state (slots, breaker, Retry-After, recent failures, load and
speed), which is small and is the server's health as this key sees it (a 401 or a per-key rate limit
says nothing about the server for another key). One group per route: the endpoint or endpoints
(replicas of one model) a call goes to, with the model, key, TLS settings, instruction and batching
settings, holding one batcher (a queue, a dispatcher task while one is queued, a replica set).

Configuration by replacement: nothing is reconfigured in place. Each key holds everything its state
is built from, so settings that change get new state, and the old state drains (its requests finish
with the settings they started with) and is forgotten like any idle entry.

Every distinct key or instruction a process ever sees would otherwise stay for the life of the
process, so both are bounded, with bounds of their own. Endpoints: ``max_endpoints`` (256, far more
than the replicas times the keys in use), forgetting first the least recently used whose health
holds nothing worth keeping, and only past that an idle one that does: a server that is down keeps
its open breaker between recalls however many replicas and keys share the process, so it gets its
breaker's probes and nothing else. Groups: ``max_groups``, a hard bound once the load is over: an
idle batcher past it is forgotten as it becomes idle, not when the next new one is made.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from ..batching.batcher import MicroBatcher
from ..batching.breaker import BreakerPolicy, CircuitBreaker
from ..batching.dispatch import Dispatch, DispatchEvents, DispatchPolicy
from ..batching.endpoint_state import EndpointState
from ..batching.limiter import EndpointLimiter
from ..batching.replicas import Replica, ReplicaSet, RetryBudget
from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.statistics import ReplicaStatistics

MAX_ENDPOINTS: Final = 256  # pairs of server and key: 16 replicas for each of 16 agent profiles' keys
MAX_GROUPS: Final = 32
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


def _batching_settings(config: RerankerConfig) -> tuple[object, ...]:
    """What a group's batcher, replica set and dispatch step are built from (not the timeout, which each
    call brings, nor what only the recall path reads)."""
    return (config.endpoints, config.key_fingerprint, config.tls_verify, config.ca_bundle, config.model, config.api,
            config.instruction, config.max_pairs_per_request, config.batch_window_ms, config.max_queued_pairs,
            config.shed_overload, config.retry_budget, config.max_retries, config.hedging, config.hedge_delay_ms)


def breaker_policy(config: RerankerConfig) -> BreakerPolicy:
    return BreakerPolicy(consecutive=config.breaker_failures, failure_rate=config.breaker_failure_rate,
                         cooldown=config.breaker_cooldown)


def dispatch_policy(config: RerankerConfig) -> DispatchPolicy:
    delay = config.hedge_delay_ms / 1000.0 if config.hedge_delay_ms > 0 else None
    return DispatchPolicy(max_retries=config.max_retries, hedge=config.hedging, hedge_delay_s=delay)


class EndpointRegistry:
    """Use on the owner loop only."""

    def __init__(self, events: DispatchEvents, *, clock: Callable[[], float] = clock.now,
                 on_open: Callable[[Endpoint], None] = lambda endpoint: None,
                 max_endpoints: int = MAX_ENDPOINTS, max_groups: int = MAX_GROUPS) -> None:
        self._events = events
        self._clock = clock
        self._on_open = on_open
        self._max_endpoints = max_endpoints
        self._max_groups = max_groups
        self._endpoints: OrderedDict[tuple[object, ...], Endpoint] = OrderedDict()
        self._groups: OrderedDict[Hashable, _Group] = OrderedDict()

    def endpoint(self, config: RerankerConfig, url: str) -> Endpoint:
        """The state of the server at ``url`` as these settings see it (created on first use)."""
        key = (url, config.key_fingerprint, config.max_concurrency, breaker_policy(config))
        found = self._endpoints.get(key)
        if found is None:
            self._make_room_for_endpoint()
            found = self._endpoints[key] = self._new_endpoint(config, url)
        else:
            self._endpoints.move_to_end(key)
        return found

    def group(self, config: RerankerConfig, to_probability: bool, bound_to: Sequence[tuple[str, object, object]],
              members: Callable[[], Members]) -> MicroBatcher:
        """The batcher for these settings and for the routes and endpoint states in ``bound_to`` (url,
        route, state), built from ``members()`` the first time; a route detected again, or an endpoint
        made anew, is another group. A warm recall with the same settings builds nothing."""
        key = (*_batching_settings(config), to_probability,
               *((url, id(route), id(state)) for url, route, state in bound_to))
        group = self._groups.get(key)
        if group is None:
            _forget(self._groups, self._max_groups - 1, _idle_group)
            group = self._groups[key] = _Group(self._new_batcher(config, members()), tuple(bound_to))
        else:
            self._groups.move_to_end(key)
        return group.batcher

    def _new_batcher(self, config: RerankerConfig, members: Members) -> MicroBatcher:
        replicas = ReplicaSet(members.replicas, budget=RetryBudget(ratio=config.retry_budget, clock=self._clock))
        return MicroBatcher(
            Dispatch(replicas, self._events, dispatch_policy(config)), mixes_queries=members.mixes_queries,
            max_pairs=members.max_pairs, window=config.batch_window_ms / 1000.0,
            max_queued_pairs=config.max_queued_pairs, shed=config.shed_overload, on_idle=self._trim_groups)

    def live_state(self) -> dict[str, object]:
        latest = {key[:2]: e for key, e in self._endpoints.items()}  # per URL and key: the settings last used
        breakers: dict[str, str] = {}
        for endpoint in latest.values():  # one entry per URL, the worst of its keys
            state = endpoint.state.breaker.state
            if _SEVERITY[state] > _SEVERITY.get(breakers.get(endpoint.url, ""), -1):
                breakers[endpoint.url] = state
        return {
            "breakers": breakers,
            "queued_pairs": sum(group.batcher.queued_pairs for group in self._groups.values()),
            "in_flight": sum(e.state.limiter.in_flight for e in self._endpoints.values()),
            "replicas": self._replica_statistics(breakers),
        }

    def footprint(self) -> dict[str, int]:
        """How much per-configuration state is kept (tests check that it stays bounded)."""
        return {"endpoints": len(self._endpoints), "batchers": len(self._groups)}

    async def close(self) -> None:
        for group in self._groups.values():
            await group.batcher.close()
        self._groups.clear()
        self._endpoints.clear()

    def _replica_statistics(self, breakers: dict[str, str]) -> tuple[ReplicaStatistics, ...]:
        """One entry per server URL (all its keys together)."""
        by_url: dict[str, list[EndpointState]] = {}
        for endpoint in self._endpoints.values():
            by_url.setdefault(endpoint.url, []).append(endpoint.state)
        total = sum(s.pairs_sent for states in by_url.values() for s in states) or 1
        return tuple(_replica_statistics(url, breakers[url], states, total) for url, states in by_url.items())

    def _new_endpoint(self, config: RerankerConfig, url: str) -> Endpoint:
        holder: list[Endpoint] = []
        breaker = CircuitBreaker(breaker_policy(config), clock=self._clock,
                                 on_open=lambda: self._on_open(holder[0]))
        holder.append(Endpoint(url, EndpointState(EndpointLimiter(config.max_concurrency), breaker)))
        return holder[0]

    def _make_room_for_endpoint(self) -> None:
        """Forget the least recently used endpoint with nothing worth keeping, or failing that, the least
        recently used idle one. A group still naming it is another group from the next call on (see
        ``group``); idle, the old one holds no slot."""
        _forget(self._endpoints, self._max_endpoints - 1, _forgettable_endpoint, _idle_endpoint)

    def _trim_groups(self) -> None:
        """A batcher went idle: keep the groups within their bound now, not when the next one is made."""
        _forget(self._groups, self._max_groups, _idle_group)


def _replica_statistics(url: str, breaker: str, states: list[EndpointState], total: int) -> ReplicaStatistics:
    pairs = sum(s.pairs_sent for s in states)
    measured = [s for s in states if s.seconds_per_request is not None]
    latency = max((s.seconds_per_request or 0.0) for s in measured) * 1000 if measured else None
    per_pair = max((s.seconds_per_pair or 0.0) for s in measured) * 1000 if measured else None
    return ReplicaStatistics(url=url, breaker=breaker, pairs=pairs, share=pairs / total,
                             in_flight=sum(s.limiter.in_flight for s in states), latency_ms=latency,
                             ms_per_pair=per_pair)


def _forgettable_endpoint(endpoint: Endpoint) -> bool:
    return endpoint.state.forgettable


def _idle_endpoint(endpoint: Endpoint) -> bool:
    return endpoint.state.idle


def _idle_group(group: _Group) -> bool:
    return group.batcher.idle


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
