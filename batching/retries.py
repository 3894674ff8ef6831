"""What the dispatch step does once an attempt fails (a first-try answer never comes here). Scoring is idempotent:
a failed attempt goes again when its error, the deadline and the replica set's retry budget allow it
(docs/failure-behaviour.md)."""

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
OVERLOAD_BASE_S: Final = 0.1
OVERLOAD_CAP_S: Final = 1.6


def rate_limit_hold(in_a_row: int, jitter: float, *, overloaded: bool = False) -> float:
    """How long the ``in_a_row``-th 429 without Retry-After holds its replica back: a second, doubling up to the cap,
    half fixed and half random (``jitter`` in [0, 1)). A hosted API (Cohere's trial keys: 10 calls a minute) stays
    over its limit while we retry in milliseconds; the base lets one passing 429 be waited out within a 10 s recall.
    The cap (reached by the sixth) holds 16 to 32 s, as Google's API guidance does: a per-minute window clears
    within 60 s, so a key back under its limit is used again within half a minute. ``overloaded``: a self-hosted
    server out of permits, free again as soon as any request ends (tens of ms): 0.1 s, doubling to 1.6 s (by the
    fifth), so a server kept full by others' requests is asked about once a second, and a recall has room to retry."""
    base, cap = (OVERLOAD_BASE_S, OVERLOAD_CAP_S) if overloaded else (RATE_LIMIT_BASE_S, RATE_LIMIT_CAP_S)
    ceiling = min(cap, base * 2.0 ** min(max(in_a_row - 1, 0), 32))  # a float power past 1,024 would overflow
    return ceiling * (1.0 + jitter) / 2


def hold_after_429(state: EndpointState, exc: RateLimited, sent_at: float, jitter: float) -> None:
    """A 429 (to a recall or a detection) holds its endpoint back for its Retry-After, else ``rate_limit_hold``;
    an overloaded server's hold also ends with our next answer from it (that request's permits came back), and
    there is none when such an answer came since the refused request went out (TEI answers the 429 only once the
    texts that got a permit are through the model: permits have come back since it refused)."""
    if exc.retry_after is not None:
        state.hold_off(clock.now() + exc.retry_after)
    elif not (exc.overloaded and state.answered_at > sent_at):
        state.hold_off_growing(sent_at, lambda in_a_row: rate_limit_hold(in_a_row, jitter, overloaded=exc.overloaded),
                               until_answer=exc.overloaded)


def _out_of_permits(exc: RerankError) -> bool:
    """A self-hosted server's 429 that it was full (``RateLimited.overloaded``) and named no wait of its own."""
    return isinstance(exc, RateLimited) and exc.overloaded and exc.retry_after is None


def _worth_waiting(request: Plan, replica: Replica, wait: float) -> bool:
    """Whether the request, sent to ``replica`` after ``wait`` seconds, could still be answered by its deadline
    (without an estimate of the replica's pace: whether any time is left then)."""
    now = clock.now()
    left = request.deadline - now - max(wait, 0.0)
    return left > 0 and worth_sending(replica.state.expected_latency(len(request.batch), now), left)


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
        if _out_of_permits(exc) and (replica.state.outstanding_requests or not replica.state.rate_limited()):
            # Refused at the door of a server serving ours (some in flight there, or one answered since it went out,
            # so no hold): it goes again once the hold ends (our next answer there), or to a ready replica as any
            # request held back does, spending neither a retry nor budget. Refused with nothing of ours served there
            # (a server full of others' work, a request too large for its permits), it is a retry like any other.
            if not _worth_waiting(request, replica, replica.state.not_before - clock.now()):
                raise exc
            return
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
        if kind == "retry_after":
            delay, wait = 0.0, replica.state.not_before - clock.now()  # the next attempt waits the Retry-After out
        else:
            delay = wait = self._backoff(request.retries)
        if not _worth_waiting(request, replica, wait) or not self.spend_budget():
            raise exc
        request.retry_unsent = kind
        await asyncio.sleep(delay)

    def goes_out(self, request: Plan) -> None:
        """An attempt goes out with the retry the budget was spent on, or to the replica it failed over to: count it."""
        if request.retry_unsent:
            request.retries += 1
            self.events.on_retry(request.retry_unsent)
            request.retry_unsent = ""
        if request.failover_unsent:
            request.failover_unsent = False
            self.events.on_failover()

    def never_sent(self, request: Plan) -> None:
        """The request ended with its retry never sent (no slot in time, a Retry-After, no caller left): refund it."""
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
        """After a stale pooled connection, whether to resend on a fresh one to the same replica (out of the budget,
        refunded if answered): the server failed nothing, so no failover, no retry."""
        if self.policy.stale_retries <= 0 or not self.spend_budget():
            return False
        resent.append(True)
        return True

    def record_failure(self, state: EndpointState, exc: BaseException, verdict: Health, sent_at: float) -> None:
        """Tell the balancer what the breaker heard (a timeout without a fair chance says nothing); a 429 holds off."""
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
