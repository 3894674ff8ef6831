"""The dispatch step: carry out one request by attempts over a replica set, balanced by power of two choices on
cost (Finagle's and Envoy's least-request balancers). With hedging on, an attempt unanswered after the set's p95
(or the set delay) gets a duplicate. A failed attempt goes on to the ``retries.Retries`` it composes."""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ..core import deadline as clock
from ..core.errors import BreakerOpen, MalformedAnswer, RateLimited, RerankError
from ..core.statistics import StatsRecorder
from ..core.statistics import percentile as nearest_rank
from .breaker import Permit, RetryBudget
from .endpoint_state import MIN_SECONDS_PER_PAIR, Replica, ServiceCost, timeout_health
from .queue import Lease, PendingQueue, Plan
from .retries import Retries

MIN_SAMPLES: Final = 20  # fewer answers than this say nothing reliable about the tail
DispatchEvents = StatsRecorder  # what the dispatch step reports, to be counted

Attempt = asyncio.Task[list[float]]


class ReplicaSet:
    """One batcher's replicas, with the retry budget and hedge latency window they share; members fixed, owner loop."""

    def __init__(self, replicas: Sequence[Replica], *, budget: RetryBudget) -> None:
        self.replicas: tuple[Replica, ...] = tuple(replicas)
        self.budget = budget
        self.latency = LatencyWindow(maxlen=256)
        self._rng = random.Random()

    def ready(self, exclude: Iterable[Replica] = ()) -> list[Replica]:
        """The members that could take a request now (their breaker admits, no Retry-After pending)."""
        left_out = {r.url for r in exclude}
        return [r for r in self.replicas
                if r.url not in left_out and r.state.breaker.would_admit() and not r.state.rate_limited()]

    def peers_short_of_work(self, chosen: Replica, pairs: int) -> list[Replica]:
        """The other ready members short of work and costing no more than ``chosen`` with ``pairs`` more."""
        load = chosen.state.outstanding_pairs + 1
        loaded = self.cost(chosen) * (load + pairs) / load
        return [r for r in self.ready(exclude=[chosen])
                if r.state.short_of_work and r.state.limiter.has_room() and self.cost(r) <= loaded]

    def cost(self, member: Replica) -> float:
        """The member's cost to the balancer; one not yet measured counts as fast as the fastest."""
        speeds = (s for r in self.replicas if (s := r.state.seconds_per_pair_now()) is not None)
        return member.state.cost(min(speeds, default=0.0))

    def share_costs(self, members: Sequence[Replica], now: float) -> tuple[list[float], list[float]]:
        """For ``balanced_shares``: each member's seconds per pair (raised by recent failures) and busy time ahead."""
        costs = [r.state.service.cost(now) for r in members]
        fastest = min((c for c in costs if c is not None), key=lambda c: c.per_pair_s, default=ServiceCost(0.0, 1.0))
        per_pair, busy = [], []
        for member, cost in zip(members, costs, strict=True):
            cost = cost or fastest
            state = member.state
            per_pair.append(max(cost.per_pair_s * state.failure_factor(), MIN_SECONDS_PER_PAIR))
            busy.append(state.busy_for(cost.fixed_s, cost.per_pair_s, now) + cost.fixed_s)
        return per_pair, busy

    def queues(self) -> set[PendingQueue]:
        """Every batcher's queue for these members (agents whose settings differ have their own)."""
        return set().union(*(r.state.queues for r in self.replicas))

    def expected_wait(self, queued_pairs: int, pairs: int, now: float) -> float | None:
        """When ``pairs`` behind ``queued_pairs`` should be answered: the queue at the ready members' joint pace, then
        its own request at the soonest. None with nothing ahead (a lone recall renews an old estimate) or no answer."""
        members = self.ready()
        if not queued_pairs and not any(r.state.outstanding_pairs for r in members):
            return None
        latencies = [latency for r in members if (latency := r.state.expected_latency(pairs, now)) is not None]
        paces = [r.state.service.seconds_per_pair(now) for r in members]
        known = [pace for pace in paces if pace is not None]
        if not latencies or not known:
            return None
        fastest = min(known)  # a member not yet measured counts as fast as the fastest
        pairs_per_s = sum(1.0 / max(pace or fastest, MIN_SECONDS_PER_PAIR) for pace in paces)
        return queued_pairs / pairs_per_s + min(latencies)

    async def acquire(self, holder: object, *, exclude: Iterable[Replica] = (), priority: bool = False,
                      due: Callable[[], float] = lambda: math.inf) -> tuple[Replica, Lease]:
        """A slot on the cheaper of two ready replicas drawn; with none ready, any (its attempt is refused at once)."""
        left_out = {r.url for r in exclude}
        candidates = self.ready(exclude) or [r for r in self.replicas if r.url not in left_out] or list(self.replicas)
        chosen = candidates[0]
        if len(candidates) > 1:
            first, second = self._rng.sample(candidates, 2)
            chosen = first if self.cost(first) <= self.cost(second) else second
        return chosen, await chosen.state.limiter.acquire(holder, priority=priority, due=due)


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

    def __init__(self, replicas: ReplicaSet, events: DispatchEvents, policy: DispatchPolicy = DispatchPolicy()) -> None:
        self.replicas = replicas
        self.events = events
        self.policy = policy
        self._retries = Retries(replicas, events, policy, random.Random())

    async def carry_out(self, request: Plan) -> list[float] | None:
        """The scores, or None when every waiter left first; raises the error that ended the request."""
        request.first_replica = request.replica.url if request.replica is not None else ""
        last_error: RerankError | None = None
        try:
            while request.has_waiters:
                replica = request.replica
                assert replica is not None, "a request reaches the dispatch step holding a slot"
                if replica.state.rate_limited() and await self._retries.fail_over(request, replica):
                    continue  # a Retry-After held it back: another took it, maybe under a Retry-After of its own
                if await replica.state.wait_out_retry_after(request.deadline):
                    self.events.on_rate_limit_wait()
                try:
                    permit = replica.state.breaker.attempt()
                except BreakerOpen as refused:
                    if await self._retries.fail_over(request, replica):
                        continue
                    raise (last_error or refused) from None
                try:
                    return await self._attempt_maybe_hedged(request, replica, permit)
                except RerankError as exc:
                    last_error = exc
                    await self._retries.after_failure(exc, request, replica)
            return None
        finally:  # however it ended (its callers left while it waited too): a retry never sent costs nothing
            if request.retry_unsent:  # (tested here: a warm recall stays out of the retries module)
                self._retries.never_sent(request)

    async def _attempt(self, request: Plan, replica: Replica, permit: Permit) -> list[float]:
        batch = request.batch
        state = replica.state
        started = clock.now()
        # a timeout counts only with a fair chance; cancelled, only when its last caller left at the deadline
        permit.timeout_health = timeout_health(state.expected_latency(len(batch), started, worst=True),
                                               request.deadline - started)
        permit.on_cancel = lambda: permit.timeout_health if request.abandoned_at_deadline else "neutral"
        self.events.on_request(len(batch))
        if request.retry_unsent or request.failover_unsent:
            self._retries.goes_out(request)
        if not request.sent:  # the budget's share is of requests that went out, not of those held back
            request.sent = True
            self.replicas.budget.record_request()
        state.begin_request(len(batch), started)
        resent: list[bool] = []
        try:
            with permit:
                scores = await replica.send(batch, request.deadline, lambda: self._retries.may_resend(resent, replica))
                if len(scores) != len(batch):
                    raise MalformedAnswer(f"expected {len(batch)} scores, got {len(scores)}")
        except (RerankError, asyncio.CancelledError) as exc:  # the balancer hears what the breaker heard
            self._retries.record_failure(state, exc, permit.verdict(exc), started)
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
        self.events.on_answer(replica.url, elapsed, len(batch))  # the status's figures, on the counters' clock
        if self.policy.delay_from_latency:  # only then is the window read
            self.replicas.latency.append(elapsed)
        request.answered_by = replica.url
        return scores

    async def _hedge(self, request: Plan, primary: Replica, sent: list[bool]) -> list[float]:
        """The duplicate: on another replica if one can take it, ahead of new batches, with a permit of its own."""
        exclude = [primary] if self.replicas.ready(exclude=[primary]) else []
        replica, lease = await self.replicas.acquire(request, exclude=exclude, priority=True)
        try:
            if not request.has_waiters:
                raise BreakerOpen("no hedge: every caller left")
            if replica.state.rate_limited():  # a 429 came while it waited for the slot
                raise RateLimited(429, "no hedge: the server asked us to wait (Retry-After)")
            permit = replica.state.breaker.attempt()
            self.events.on_hedge()
            sent.append(True)
            return await self._attempt(request, replica, permit)
        finally:
            lease.release()

    async def _attempt_maybe_hedged(self, request: Plan, replica: Replica, permit: Permit) -> list[float]:
        delay = self.policy.hedge_delay_s
        if self.policy.delay_from_latency:
            delay = self.replicas.latency.percentile(self.policy.hedge_percentile)
        if delay is not None:
            delay = max(delay, self.policy.hedge_floor_s)
        if not self.policy.hedge or delay is None or clock.now() + delay >= request.deadline:
            return await self._attempt(request, replica, permit)
        first = asyncio.create_task(self._attempt(request, replica, permit))
        first.add_done_callback(lambda task: permit.report("neutral") if task.cancelled() else None)

        sent_of: dict[Attempt, list[bool]] = {}  # each hedge's ``sent``: whether it went out

        def start_hedge() -> Attempt | None:
            if not request.has_waiters or not self.replicas.ready() or not self._retries.spend_budget():
                return None  # no replica may take it now (breakers, Retry-After): no hedge
            sent: list[bool] = []
            hedge = asyncio.create_task(self._hedge(request, replica, sent))
            # one that never went out (no slot before the answer, no caller left, refused) cost the server nothing
            hedge.add_done_callback(lambda _: None if sent else self.replicas.budget.refund())
            sent_of[hedge] = sent
            return hedge

        return await race(first, start_hedge, delay=delay, hedges=self.policy.hedges,
                          went_out=lambda hedge: bool(sent_of[hedge]))


class LatencyWindow(deque[float]):
    """The last successful attempts' latencies of a replica set, in seconds."""

    def percentile(self, fraction: float) -> float | None:
        """Nearest-rank percentile, or None while too few answers were seen."""
        return nearest_rank(sorted(self), fraction) if len(self) >= MIN_SAMPLES else None


async def race(first: Attempt, start_hedge: Callable[[], Attempt | None], *, delay: float, hedges: int,
               went_out: Callable[[Attempt], bool]) -> list[float]:
    """The first answer of ``first`` and up to ``hedges`` duplicates (after ``delay``, then at once when one fails);
    if all fail, ``first``'s error. Once ``first`` failed, a hedge still waiting for a slot is not waited for: that
    slot may be the one this very request holds, and the retry ``first``'s error allows should go now."""
    pending = {first}
    sent = 0
    timeout: float | None = delay
    try:
        while pending:
            done, pending = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is None:
                    return task.result()
            if first.done() and not any(went_out(task) for task in pending):
                for task in pending:
                    task.cancel()
                if pending:  # once ended, each has given back its budget: the retry may need it
                    await asyncio.wait(pending)
                break
            timeout = None  # from now on only an answer or a failure moves the race on
            if pending == {first} and sent < hedges and (hedge := start_hedge()) is not None:
                pending.add(hedge)
                sent += 1
        return first.result()  # every attempt failed: raise the first one's error
    finally:
        for task in pending:  # the losers: each reports its own outcome; its error is not ours
            task.cancel()
            task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
