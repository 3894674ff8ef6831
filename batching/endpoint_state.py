"""Everything the dispatch step keeps per endpoint (base URL and API key): its concurrency slots,
breaker, retry budget, recent latencies and the time before which a 429 asked us not to send."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from ..core.errors import RateLimited
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

    async def wait_out_retry_after(self, deadline: float) -> bool:
        """Before any request: wait out a Retry-After when the deadline allows it (True when it
        waited), and raise ``RateLimited`` at once when it does not."""
        wait = self.not_before - time.monotonic()
        if wait <= 0:
            return False
        if time.monotonic() + wait >= deadline:
            raise RateLimited(429, f"the server asked to wait {wait:.2f} s more (Retry-After)", retry_after=wait)
        await asyncio.sleep(wait)
        return True

    @property
    def idle(self) -> bool:
        return self.limiter.in_flight == 0
