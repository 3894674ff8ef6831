"""What the route book keeps and runs beside its cache: a detection's arguments, a known route with its age,
and the check of a route once it is ``DETECTION_TTL_S`` old.

A check runs beside the route instead of the route expiring: a recall that met an expired route waited for a whole
detection and got a new batcher, which forgot its hedge-delay window and retry budget, every ten minutes with
nothing changed on the server. A check that fails keeps the working route and leaves the breaker alone: the
recalls themselves say whether the route still holds.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final

from ..batching.endpoint_state import EndpointState, timeout_health
from ..batching.retries import hold_after_429
from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.detection import PROBE_DOCUMENTS
from ..core.errors import RateLimited
from .detection import Route
from .endpoints import Endpoint, HttpTransport

log = logging.getLogger("a0_reranker")

DETECTION_TTL_S: Final = 600.0  # a known route is checked again this long after it was detected or confirmed
ROUTE_FIELDS: Final = ("endpoint", "api", "model", "api_key", "tls_verify", "ca_bundle")

Resolve = Callable[[HttpTransport, RerankerConfig, float], Awaitable[Route]]


@dataclass(frozen=True)
class Detection:
    """Equal (cached together) when only settings that do not change the answer differ."""

    key: tuple[object, ...]
    config: RerankerConfig = field(compare=False)
    deadline: float = field(compare=False, default=0.0)
    endpoint: Endpoint | None = field(compare=False, default=None)


@dataclass(eq=False)
class KnownRoute:
    route: Route
    checked_at: float
    checking: bool = False  # a check is under way: recalls go on using ``route`` meanwhile

    def cap(self, limit: int) -> None:
        self.route = self.route.capped(limit)

    def checked(self, found: Route | None, now: float) -> None:
        """A route found that differs replaces this one; the same, or none (the check failed), keeps this one and
        its batcher."""
        if found is not None and found.dialect.max_pairs == self.route.capped_from:  # still what the server refused:
            found = found.capped(self.route.dialect.max_pairs)  # detection cannot read its limit (Infinity's)
        if found is not None and not found.same_as(self.route):
            log.info("a0_reranker: the server's API changed since it was detected; using the new route")
            self.route = found
        self.checked_at, self.checking = now, False


@asynccontextmanager
async def held_off(state: EndpointState, deadline: float) -> AsyncIterator[None]:
    """A detection is a request like any other: it waits out the endpoint's hold (or raises ``RateLimited``), a 429
    holds the endpoint back (``hold_after_429``), and its answer ends the streak of 429s as a recall's does."""
    await state.wait_out_retry_after(deadline)
    started = clock.now()  # its requests go out from here: answered, they count as sent now
    try:
        yield
    except RateLimited as exc:
        hold_after_429(state, exc, started, random.random())
        raise
    state.answered_within_limit(started)


async def detect(resolve: Resolve, transport: HttpTransport, detection: Detection, state: EndpointState,
                 on_detection: Callable[[], None]) -> Route:
    """An attempt like any other, under the endpoint's hold and a breaker permit (a probe while half-open)."""
    async with held_off(state, detection.deadline):
        with state.breaker.attempt() as permit:
            started = clock.now()  # its timeout counts against the server only with a fair chance, as a request's
            latency = state.expected_latency(len(PROBE_DOCUMENTS), started, worst=True)
            permit.timeout_health = timeout_health(latency, detection.deadline - started)
            on_detection()
            route = await resolve(transport, detection.config, detection.deadline)
            if not route.heard:  # found by the host's name alone, it asked the server nothing: the recall judges
                permit.report("neutral")
            return route


async def recheck(resolve: Resolve, transport: HttpTransport, detection: Detection, state: EndpointState,
                  on_detection: Callable[[], None]) -> Route | None:
    """The route the server speaks now, or None when the check failed. No breaker permit: a failure says nothing
    the recalls on the route would not say themselves."""
    try:
        async with held_off(state, detection.deadline):
            on_detection()
            return await resolve(transport, detection.config, detection.deadline)
    except Exception as exc:
        log.info("a0_reranker: checking the detected API again failed (%s); the route in use stays",
                 getattr(exc, "reason", type(exc).__name__))
        return None
