"""What the dispatch step does once an attempt fails, kept apart: a request answered at its first try never
comes here. It owns no state and spends the replica set's retry budget: scoring is idempotent, so a failed
attempt goes again when its error allows it, the deadline leaves room and the budget agrees
(docs/failure-behaviour.md).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from ..core import deadline as clock
from ..core.errors import (
    DeadlineExceeded,
    InputTooLong,
    RateLimited,
    RerankError,
    ServerError,
    StaleConnection,
    TransportError,
)
from .breaker import Health
from .endpoint_state import EndpointState, Replica, worth_sending

if TYPE_CHECKING:  # types only: the dispatch step composes a ``Retries``
    from .dispatch import DispatchEvents, DispatchPolicy, ReplicaSet
    from .queue import Plan

RetryKind = Literal["now", "backoff", "retry_after", "never"]
RETRYABLE_STATUSES: Final = frozenset({502, 503, 504})
RATE_LIMIT_BASE_S: Final = 1.0
RATE_LIMIT_CAP_S: Final = 32.0


def rate_limit_hold(in_a_row: int, jitter: float) -> float:
    """How long the ``in_a_row``-th 429 without Retry-After holds its replica back: a second, doubling with each
    one in a row up to ``RATE_LIMIT_CAP_S``, with equal jitter (``jitter`` in [0, 1): half fixed, half random).
    A hosted API answering 429 (Cohere's trial keys: 10 calls a minute) stays over its limit while we retry in
    milliseconds; the base lets one passing 429 still be waited out within a 10 s recall. The cap (the sixth in a
    row reaches it) ends a stuck streak at 16 to 32 s, as Google's API guidance does: a per-minute window clears
    within 60 s, so a key back under its limit is used again within half a minute, and one still over it gets
    two to four requests a minute."""
    ceiling = min(RATE_LIMIT_CAP_S, RATE_LIMIT_BASE_S * 2 ** max(in_a_row - 1, 0))
    return ceiling * (1.0 + jitter) / 2


def hold_after_429(state: EndpointState, exc: RateLimited, sent_at: float, jitter: float) -> None:
    """A 429 to a request (a recall's or detection's) sent at ``sent_at`` holds its endpoint back: as long as its
    Retry-After asks, or without one as one more in a row of the endpoint's 429s (``rate_limit_hold``)."""
    if exc.retry_after is not None:
        state.hold_off(clock.now() + exc.retry_after)
    else:
        state.hold_off_growing(sent_at, lambda in_a_row: rate_limit_hold(in_a_row, jitter))


def retry_kind(exc: BaseException) -> RetryKind:
    if isinstance(exc, StaleConnection):
        return "now"  # to another replica at once, or not at all
    if isinstance(exc, RateLimited):
        return "retry_after"
    if isinstance(exc, InputTooLong):
        return "never"
    if isinstance(exc, ServerError):
        return "backoff" if exc.status in RETRYABLE_STATUSES else "never"
    if isinstance(exc, TransportError):
        return "backoff" if exc.retryable else "never"
    return "never"  # other 4xx, malformed answers, running out of time


@dataclass(eq=False)
class Retries:
    """One dispatch step's retries and failovers, each counted as it goes out (and the budget hedges spend)."""

    replicas: ReplicaSet
    events: DispatchEvents
    policy: DispatchPolicy
    rng: random.Random

    async def after_failure(self, exc: RerankError, request: Plan, replica: Replica) -> None:
        """Go on to another replica at once, or wait for this one, or give up by raising ``exc``."""
        kind = retry_kind(exc)
        if kind == "never" or request.retries >= self.policy.max_retries:
            raise exc
        if self.replicas.ready(exclude=[replica]):
            if not self.spend_budget():
                raise exc
            request.retry_unsent = kind  # counted by ``goes_out``, or refunded by ``never_sent``
            if not await self.fail_over(request, replica):  # a replica was ready just now: kept as a guard
                raise exc
            return
        if kind == "now":  # the transport already sent it again to this replica (or not, by the budget)
            raise exc
        now = clock.now()
        if kind == "retry_after":
            delay, wait = 0.0, replica.state.not_before - now  # the next attempt waits the Retry-After out
        else:
            delay = wait = self._backoff(request.retries)
        latency = replica.state.expected_latency(len(request.batch), now)
        left = request.deadline - now - wait  # without an estimate, still no retry once the wait outlasts it
        if left <= 0 or not worth_sending(latency, left) or not self.spend_budget():
            raise exc
        request.retry_unsent = kind
        await asyncio.sleep(delay)

    def goes_out(self, request: Plan) -> None:
        """An attempt of ``request`` goes out with the retry the budget was spent on, or to the replica it failed
        over to: it is made."""
        if request.retry_unsent:
            request.retries += 1
            self.events.on_retry(request.retry_unsent)
            request.retry_unsent = ""
        if request.failover_unsent:
            request.failover_unsent = False
            self.events.on_failover()

    def never_sent(self, request: Plan) -> None:
        """``request`` ended with the retry the budget was spent on never sent (no slot before the deadline, a
        Retry-After, every caller left): the budget gets it back."""
        request.retry_unsent = ""
        self.replicas.budget.refund()

    async def fail_over(self, request: Plan, failed: Replica) -> bool:
        """Move the request (and its slot) to another replica that can take it; False if there is none."""
        if not self.replicas.ready(exclude=[failed]):
            return False
        held, request.replica, request.lease = request.lease, None, None
        assert held is not None, "a request reaches the dispatch step holding a slot"
        held.release()
        remaining = request.deadline - clock.now()
        try:
            request.replica, request.lease = await asyncio.wait_for(
                self.replicas.acquire(request, exclude=[failed], priority=True), max(remaining, 0.0))
        except TimeoutError:
            raise DeadlineExceeded("no replica had a free slot before the deadline") from None
        request.failover_unsent = True  # counted by ``goes_out``, as a retry is
        return True

    def may_resend(self, resent: list[bool], replica: Replica) -> bool:
        """After a stale pooled connection, whether the transport may send again on a fresh one, to the same replica
        (out of the retry budget, given back if answered): the server failed nothing, so no failover, no retry."""
        if self.policy.stale_retries <= 0 or not self.spend_budget():
            return False
        resent.append(True)
        return True

    def record_failure(self, state: EndpointState, exc: BaseException, verdict: Health, sent_at: float) -> None:
        """What a failed attempt (sent at ``sent_at``) tells the balancer (``verdict``: its permit's, as the breaker
        heard it: a timeout without a fair chance says nothing), and a 429's hold on the replica: its Retry-After,
        or without one a hold growing with the 429s in a row (``rate_limit_hold``)."""
        if verdict in ("down", "failure"):
            state.failed()
        if isinstance(exc, RateLimited):
            hold_after_429(state, exc, sent_at, self.rng.random())

    def spend_budget(self) -> bool:
        if self.replicas.budget.try_spend():
            return True
        self.events.on_budget_spent()
        return False

    def _backoff(self, retries: int) -> float:
        """Exponential with equal jitter: half fixed, half random, so retries spread out but still wait."""
        ceiling = min(self.policy.backoff_cap_s, self.policy.backoff_base_s * (2 ** retries))
        return ceiling / 2 + self.rng.uniform(0.0, ceiling / 2)
