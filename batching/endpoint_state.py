"""Everything the dispatch step keeps per endpoint (base URL and API key): its concurrency slots,
breaker, retry budget, recent latencies and the time before which a 429 asked us not to send."""

from __future__ import annotations

from dataclasses import dataclass, field

from .breaker import CircuitBreaker
from .latency import LatencyWindow
from .limiter import EndpointLimiter
from .retry_budget import RetryBudget


@dataclass(eq=False)
class EndpointState:
    limiter: EndpointLimiter
    breaker: CircuitBreaker
    budget: RetryBudget
    latency: LatencyWindow = field(default_factory=LatencyWindow)
    not_before: float = 0.0  # monotonic seconds; set from a 429's Retry-After

    def hold_off(self, until: float) -> None:
        """No attempt to this endpoint before ``until`` (a later Retry-After only extends it)."""
        self.not_before = max(self.not_before, until)

    @property
    def idle(self) -> bool:
        return self.limiter.in_flight == 0
