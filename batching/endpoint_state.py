"""Everything the dispatch step keeps per endpoint (one server: base URL and API key): its concurrency
slots, breaker, the time before which a 429 asked us not to send, and the load and speed the
balancer reads (pairs in flight, seconds per pair as an exponentially weighted moving average)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Final

from ..core.errors import RateLimited
from .breaker import CircuitBreaker
from .limiter import EndpointLimiter

EWMA_WEIGHT: Final = 0.3  # of the newest answer: a replica that slows down is noticed within a few requests


@dataclass(eq=False)
class EndpointState:
    limiter: EndpointLimiter
    breaker: CircuitBreaker
    not_before: float = 0.0  # monotonic seconds; set from a 429's Retry-After
    outstanding_pairs: int = 0
    seconds_per_pair: float | None = None  # None: never measured
    seconds_per_request: float | None = None
    pairs_sent: int = 0
    answers: int = 0

    def hold_off(self, until: float) -> None:
        """No attempt to this endpoint before ``until`` (a later Retry-After only extends it)."""
        self.not_before = max(self.not_before, until)

    def rate_limited(self) -> bool:
        return self.not_before > time.monotonic()

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

    def answered(self, seconds: float, pairs: int) -> None:
        """A request of ``pairs`` pairs came back fine after ``seconds``."""
        self.seconds_per_pair = _ewma(self.seconds_per_pair, seconds / max(pairs, 1))
        self.seconds_per_request = _ewma(self.seconds_per_request, seconds)
        self.answers += 1

    @property
    def cost(self) -> float:
        """What one more request costs here, for the balancer: its speed times its load."""
        return (self.seconds_per_pair or 0.0) * (self.outstanding_pairs + 1)

    @property
    def idle(self) -> bool:
        return self.limiter.in_flight == 0


def _ewma(previous: float | None, sample: float) -> float:
    return sample if previous is None else previous + EWMA_WEIGHT * (sample - previous)
