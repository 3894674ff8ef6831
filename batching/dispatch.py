"""The dispatch step: carry out one request (a batch of pairs) by one or more attempts.

Between the batcher and the transport. A request holds one concurrency slot of one replica at a time,
and each attempt asks that replica's breaker for a permit, which always hears the outcome. A failed
attempt is sent again when its error allows it (see the breaker's verdicts), the request's deadline
leaves room and the retry budget agrees: on another replica that can take it, at once; otherwise on
the same one, connection errors and 502/503/504 after a jittered exponential backoff, a 429 after its
Retry-After, which also holds every other request to that replica back until then. With hedging on,
an attempt still unanswered after the set's p95 latency (or a set delay) gets a duplicate on another
replica when there is one; the first answer wins and the other is cancelled. A request whose waiters
have all gone is dropped before any attempt. A stale pooled connection goes on to another replica
when one can take it, else the transport sends it again at once on a fresh one (paid from the budget
only if that fails too); either way it is never held against the server.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Protocol

from ..core import deadline as clock
from ..core.dialects import ScoreBatch
from ..core.errors import BreakerOpen, DeadlineExceeded, MalformedAnswer, RateLimited, RerankError
from .breaker import Permit, RetryKind, health_of, retry_kind
from .endpoint_state import EndpointState, timeout_health, worth_sending
from .queue import Lease
from .replicas import Replica, ReplicaSet, race


class DispatchEvents(Protocol):
    """What the dispatch step reports, to be counted (``core.statistics.StatsRecorder`` records it)."""

    def on_request(self, pairs: int) -> None: ...

    def on_retry(self, kind: str) -> None: ...

    def on_rate_limit_wait(self) -> None: ...

    def on_failover(self) -> None: ...

    def on_hedge(self) -> None: ...

    def on_budget_spent(self) -> None: ...

    def on_queue_wait(self, seconds: float) -> None: ...


class Request(Protocol):
    """What the dispatch step needs of a request; the batcher's ``Plan`` is one."""

    batch: ScoreBatch
    retries: int
    abandoned_at_deadline: bool
    sent: bool  # its first attempt went out (the retry budget counts it then)
    replica: Replica | None  # whose slot the request holds
    lease: Lease | None  # that slot
    first_replica: str  # the replica its first attempt went to
    answered_by: str  # the replica that answered

    @property
    def deadline(self) -> float: ...

    @property
    def has_waiters(self) -> bool: ...


@dataclass(frozen=True, kw_only=True)
class DispatchPolicy:
    max_retries: int = 2
    stale_retries: int = 1  # 0: an attempt whose pooled connection was stale is not sent again
    backoff_base_s: float = 0.05
    backoff_cap_s: float = 1.0
    hedge: bool = False
    hedge_delay_s: float | None = None  # None: the set's observed p95
    hedge_floor_s: float = 0.05
    hedge_percentile: float = 0.95
    hedges: int = 2  # duplicates per attempt: one after the delay, one more if that one fails

    @property
    def delay_from_latency(self) -> bool:  # the hedge delay is a percentile of the set's answer times
        return self.hedge and self.hedge_delay_s is None


class Dispatch:
    """Carries out the requests of one batcher over its replica set; lives on the owner loop."""

    def __init__(self, replicas: ReplicaSet, events: DispatchEvents, policy: DispatchPolicy = DispatchPolicy(),
                 rng: random.Random | None = None) -> None:
        self.replicas = replicas
        self.events = events
        self.policy = policy
        self._rng = rng or random.Random()

    async def carry_out(self, request: Request) -> list[float] | None:
        """The scores, or None when every waiter left first. Raises the error that ended the request.
        The request comes holding a slot of one replica (``request.replica``)."""
        last_error: RerankError | None = None
        request.first_replica = request.replica.url if request.replica is not None else ""
        while request.has_waiters:
            replica = await self._replica_for(request)
            try:
                permit = self._permit(request, replica)
            except BreakerOpen as refused:
                if await self._fail_over(request, replica):
                    continue
                raise (last_error or refused) from None
            try:
                scores = await self._attempt_maybe_hedged(request, replica, permit)
            except RerankError as exc:
                last_error = exc
                await self._retry_or_raise(exc, retry_kind(exc), request, replica)
            else:
                return scores
        return None

    async def _retry_or_raise(self, exc: RerankError, kind: RetryKind, request: Request, replica: Replica) -> None:
        """Go on to another replica at once, or wait for this one, or give up by raising ``exc``."""
        if kind == "never" or request.retries >= self.policy.max_retries:
            raise exc
        if self.replicas.ready(exclude=[replica]):
            if not self._spend_budget():
                raise exc
            self._count_retry(request, kind)
            if not await self._fail_over(request, replica):
                raise exc
            return
        if kind == "now":  # a stale connection, already sent again to this replica (or not, by the budget)
            raise exc
        delay = self._retry_delay(kind, request, replica)
        if delay is None:
            raise exc
        self._count_retry(request, kind)
        await asyncio.sleep(delay)

    def _count_retry(self, request: Request, kind: RetryKind) -> None:
        request.retries += 1
        self.events.on_retry(kind)

    async def _replica_for(self, request: Request) -> Replica:
        """The replica the next attempt goes to: the one whose slot the request holds, unless a
        Retry-After holds it back and another can take the request now."""
        replica = request.replica
        assert replica is not None, "a request reaches the dispatch step holding a slot"
        if replica.state.rate_limited() and await self._fail_over(request, replica):
            assert request.replica is not None
            return request.replica
        if await replica.state.wait_out_retry_after(request.deadline):
            self.events.on_rate_limit_wait()
        return replica

    async def _fail_over(self, request: Request, failed: Replica) -> bool:
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
        self.events.on_failover()
        return True

    # --- one attempt ----------------------------------------------------------------------------

    def _permit(self, request: Request, replica: Replica) -> Permit:
        """The replica breaker's permit for one attempt. A timeout counts against the server only when the
        attempt had a fair chance (``_attempt`` judges that as it sends), and a cancelled attempt only
        when its last caller gave up at the deadline: a timeout too."""
        permit = replica.state.breaker.attempt()
        permit.on_cancel = lambda: permit.timeout_health if request.abandoned_at_deadline else "neutral"
        return permit

    async def _attempt(self, request: Request, replica: Replica, permit: Permit) -> list[float]:
        batch = request.batch
        state = replica.state
        started = clock.now()
        permit.timeout_health = timeout_health(state.expected_latency(len(batch), started, worst=True),
                                               request.deadline - started)
        self.events.on_request(len(batch))
        if not request.sent:  # the budget's share is of requests that went out, not of those held back
            request.sent = True
            self.replicas.budget.record_request()
        state.begin_request(len(batch), started)
        resent: list[bool] = []
        try:
            with permit:
                scores = await replica.send(batch, request.deadline, lambda: self._may_resend(resent, replica))
                if len(scores) != len(batch):
                    raise MalformedAnswer(f"expected {len(batch)} scores, got {len(scores)}")
        except RerankError as exc:
            self._failed(state, exc)
            raise
        except Exception as exc:  # a bug in building or parsing: a failed attempt, never a stranded request
            state.failed()
            raise RerankError(f"unexpected error: {exc!r}") from exc
        finally:
            state.end_request(len(batch))
        if resent:
            self.replicas.budget.refund()  # the resend after a stale connection cost the server nothing
        elapsed = clock.now() - started
        state.answered(elapsed, len(batch), started)
        if self.policy.delay_from_latency:  # only then is the window read
            self.replicas.latency.record(elapsed)
        request.answered_by = replica.url
        return scores

    def _may_resend(self, resent: list[bool], replica: Replica) -> bool:
        """After a stale pooled connection, whether the transport may send again (out of the retry budget,
        given back if answered): not when another replica can take it, as going there is one retry."""
        if self.policy.stale_retries <= 0 or self.replicas.ready(exclude=[replica]) or not self._spend_budget():
            return False
        resent.append(True)
        return True

    def _failed(self, state: EndpointState, exc: RerankError) -> None:
        """What a failed attempt tells the balancer, and a 429's hold on the replica."""
        if health_of(exc) in ("down", "failure"):
            state.failed()
        if isinstance(exc, RateLimited):
            wait = exc.retry_after if exc.retry_after is not None else self._backoff(0)
            state.hold_off(clock.now() + wait)

    # --- retries on the same replica ------------------------------------------------------------

    def _retry_delay(self, kind: RetryKind, request: Request, replica: Replica) -> float | None:
        """How long to wait before sending to the same replica again, or None to give up now."""
        now = clock.now()
        if kind == "retry_after":
            delay = 0.0  # the next attempt waits the Retry-After out first
            wait = replica.state.not_before - now
        else:
            delay = wait = self._backoff(request.retries)
        latency = replica.state.expected_latency(len(request.batch), now)
        if not worth_sending(latency, request.deadline - now - wait) or not self._spend_budget():
            return None
        return delay

    def _spend_budget(self) -> bool:
        if self.replicas.budget.try_spend():
            return True
        self.events.on_budget_spent()
        return False

    def _backoff(self, retries: int) -> float:
        """Exponential with equal jitter: half fixed, half random, so retries spread out but still wait."""
        ceiling = min(self.policy.backoff_cap_s, self.policy.backoff_base_s * (2 ** retries))
        return ceiling / 2 + self._rng.uniform(0.0, ceiling / 2)

    # --- hedging --------------------------------------------------------------------------------

    def _hedge_delay(self) -> float | None:
        if not self.policy.hedge:
            return None
        delay = self.policy.hedge_delay_s
        if self.policy.delay_from_latency:
            delay = self.replicas.latency.percentile(self.policy.hedge_percentile)
        return None if delay is None else max(delay, self.policy.hedge_floor_s)

    async def _attempt_maybe_hedged(self, request: Request, replica: Replica, permit: Permit) -> list[float]:
        delay = self._hedge_delay()
        if delay is None or clock.now() + delay >= request.deadline:
            return await self._attempt(request, replica, permit)
        first = asyncio.create_task(self._attempt(request, replica, permit))
        first.add_done_callback(lambda task: permit.report("neutral") if task.cancelled() else None)

        def start_hedge() -> asyncio.Task[list[float]] | None:
            if not request.has_waiters or not self.replicas.ready() or not self._spend_budget():
                return None  # no replica may take it now (breakers, Retry-After): no hedge
            return asyncio.create_task(self._hedge(request, replica))

        return await race(first, start_hedge, delay=delay, hedges=self.policy.hedges)

    async def _hedge(self, request: Request, primary: Replica) -> list[float]:
        """The duplicate: another replica if one can take it (else the same, unless a Retry-After holds it
        back), the next free slot there (ahead of new batches), its own permit, one attempt."""
        others = self.replicas.ready(exclude=[primary])
        exclude = [primary] if others else []
        replica, lease = await self.replicas.acquire(request, exclude=exclude, priority=True)
        try:
            if not request.has_waiters:
                raise BreakerOpen("no hedge: every caller left")
            if replica.state.rate_limited():  # a 429 came while it waited for the slot
                raise RateLimited(429, "no hedge: the server asked us to wait (Retry-After)")
            permit = self._permit(request, replica)
            self.events.on_hedge()
            return await self._attempt(request, replica, permit)
        finally:
            lease.release()
