"""The service's per-endpoint state, built from the settings and kept bounded.

One ``Endpoint`` per base URL and API key: its dispatch state (slots, breaker, retry budget, latency,
Retry-After) and one batcher per route (dialect, model, instruction, TLS settings) behind it. Every
distinct key or instruction a process ever sees would otherwise stay for the life of the process, so
the registry keeps at most ``max_endpoints`` endpoints and ``max_batchers`` batchers each, forgetting
the least recently used idle ones (nothing queued, nothing in flight) when a new one arrives.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeVar

from ..batching.batcher import MicroBatcher
from ..batching.breaker import BreakerPolicy, CircuitBreaker
from ..batching.dispatch import Dispatch, DispatchPolicy, SendFn
from ..batching.endpoint_state import EndpointState
from ..batching.limiter import EndpointLimiter
from ..batching.retry_budget import RetryBudget
from ..core.config import RerankerConfig
from ..core.statistics import StatsRecorder

MAX_ENDPOINTS: Final = 32
MAX_BATCHERS: Final = 8
_SEVERITY: Final = {"closed": 0, "half_open": 1, "open": 2}  # status shows an endpoint's worst breaker


@dataclass(eq=False)
class Endpoint:
    url: str
    state: EndpointState
    batchers: OrderedDict[Hashable, MicroBatcher] = field(default_factory=OrderedDict)
    route_keys: set[tuple[object, ...]] = field(default_factory=set)  # detection entries made through it

    @property
    def idle(self) -> bool:
        return self.state.idle and all(b.idle for b in self.batchers.values())


def breaker_policy(config: RerankerConfig) -> BreakerPolicy:
    return BreakerPolicy(consecutive=config.breaker_failures, failure_rate=config.breaker_failure_rate,
                         cooldown=config.breaker_cooldown)


def dispatch_policy(config: RerankerConfig) -> DispatchPolicy:
    delay = config.hedge_delay_ms / 1000.0 if config.hedge_delay_ms > 0 else None
    return DispatchPolicy(max_retries=config.max_retries, hedge=config.hedge, hedge_delay_s=delay)


class EndpointRegistry:
    """Use on the owner loop only."""

    def __init__(self, stats: StatsRecorder, *, clock: Callable[[], float] = time.monotonic,
                 on_open: Callable[[Endpoint], None] = lambda endpoint: None,
                 max_endpoints: int = MAX_ENDPOINTS, max_batchers: int = MAX_BATCHERS) -> None:
        self._stats = stats
        self._clock = clock
        self._on_open = on_open
        self._max_endpoints = max_endpoints
        self._max_batchers = max_batchers
        self._endpoints: OrderedDict[tuple[str, str], Endpoint] = OrderedDict()

    def endpoint(self, config: RerankerConfig) -> Endpoint:
        """The endpoint's state, configured from these settings (created on first use)."""
        key = (config.endpoint, config.key_fingerprint)
        found = self._endpoints.get(key)
        if found is None:
            _evict_idle(self._endpoints, self._max_endpoints)
            found = self._endpoints[key] = self._new_endpoint(config)
        else:
            self._endpoints.move_to_end(key)
            found.state.limiter.resize(config.max_concurrency)
            found.state.breaker.configure(breaker_policy(config))
            found.state.budget.configure(ratio=config.retry_budget)
        return found

    def batcher(self, endpoint: Endpoint, key: Hashable, config: RerankerConfig, *, mixes_queries: bool,
                max_pairs: int, send: Callable[[], SendFn]) -> MicroBatcher:
        """The route's batcher at this endpoint; ``send`` builds its sender when it is new."""
        window = config.batch_window_ms / 1000.0
        batcher = endpoint.batchers.get(key)
        if batcher is None:
            _evict_idle(endpoint.batchers, self._max_batchers)
            dispatch = Dispatch(send(), endpoint.state, self._stats, dispatch_policy(config))
            batcher = endpoint.batchers[key] = MicroBatcher(
                dispatch, limiter=endpoint.state.limiter, mixes_queries=mixes_queries, max_pairs=max_pairs,
                window=window, max_queued_pairs=config.max_queued_pairs)
        else:
            endpoint.batchers.move_to_end(key)
            batcher.dispatch.policy = dispatch_policy(config)
            batcher.configure(max_pairs=max_pairs, window=window, max_queued_pairs=config.max_queued_pairs)
        return batcher

    def live_state(self) -> dict[str, object]:
        breakers: dict[str, str] = {}
        for endpoint in self._endpoints.values():  # one entry per URL, whatever the keys
            state = endpoint.state.breaker.state
            if _SEVERITY[state] > _SEVERITY.get(breakers.get(endpoint.url, ""), -1):
                breakers[endpoint.url] = state
        return {
            "breakers": breakers,
            "queued_pairs": sum(b.queued_pairs for e in self._endpoints.values() for b in e.batchers.values()),
            "in_flight": sum(e.state.limiter.in_flight for e in self._endpoints.values()),
        }

    def footprint(self) -> dict[str, int]:
        """How much per-configuration state is kept (tests check that it stays bounded)."""
        return {"endpoints": len(self._endpoints),
                "batchers": sum(len(e.batchers) for e in self._endpoints.values())}

    async def close(self) -> None:
        for endpoint in self._endpoints.values():
            for batcher in endpoint.batchers.values():
                await batcher.close()
        self._endpoints.clear()

    def _new_endpoint(self, config: RerankerConfig) -> Endpoint:
        limiter = EndpointLimiter(config.max_concurrency)
        budget = RetryBudget(ratio=config.retry_budget, clock=self._clock)
        holder: list[Endpoint] = []
        breaker = CircuitBreaker(breaker_policy(config), clock=self._clock,
                                 on_open=lambda: self._on_open(holder[0]))
        holder.append(Endpoint(config.endpoint, EndpointState(limiter, breaker, budget)))
        return holder[0]


class _Forgettable(Protocol):
    @property
    def idle(self) -> bool: ...


K = TypeVar("K")
V = TypeVar("V", bound=_Forgettable)


def _evict_idle(entries: OrderedDict[K, V], limit: int) -> None:
    """Make room for one more by forgetting the least recently used idle entries."""
    for key in list(entries):
        if len(entries) < limit:
            return
        if entries[key].idle:
            del entries[key]
