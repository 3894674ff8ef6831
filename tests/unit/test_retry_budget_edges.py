"""The retry budget (and the retries counted) take only requests that go out, and a failover never undercuts a
Retry-After. Sequenced by events and a virtual clock, never by sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from support.loop_steps import until
from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter, Job, Plan
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import RateLimited, RerankError, ServerError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


def one_replica(send: Callable[..., object], policy: DispatchPolicy, *, cap: int = 4
                ) -> tuple[MicroBatcher, EndpointState, RetryBudget, StatsRecorder]:
    state = EndpointState(EndpointLimiter(cap), CircuitBreaker(BreakerPolicy(cooldown=60)))
    budget = RetryBudget(ratio=0.2, reserve=2)
    stats = StatsRecorder()
    batcher = MicroBatcher(Dispatch(ReplicaSet([Replica("http://server", state, send)], budget=budget), stats, policy),
                           mixes_queries=True, max_pairs=100, window=0.01, max_queued_pairs=1000)
    return batcher, state, budget, stats


@pytest.mark.parametrize("error", [
    RateLimited(429, "slow down", retry_after=5.0),  # a Retry-After past the deadline
    ServerError(503, "busy"),  # a backoff (25-50 ms) past the deadline
], ids=["retry_after", "backoff"])
def test_a_retry_that_cannot_go_out_before_the_deadline_spends_no_budget(error: RerankError) -> None:
    """A server never answered yet (no latency estimate) fails the first attempt; the wait before a retry
    (its Retry-After, or the backoff) ends after the deadline, so no retry can be sent. The budget and the
    counters must not record one: it once spent the budget's reserve and counted a retry for it."""
    sent: list[ScoreBatch] = []

    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(batch)
        raise error

    async def main() -> None:
        batcher, state, budget, stats = one_replica(send, DispatchPolicy(max_retries=2))
        with pytest.raises(RerankError):
            await batcher.score("q", ["d1", "d2"], clock.now() + 0.02)
        await until(lambda: batcher.idle)
        assert len(sent) == 1 and state.limiter.in_flight == 0 and state.outstanding_requests == 0
        assert stats.snapshot().retries == 0  # nothing was sent again
        assert budget.try_spend() and budget.try_spend()  # the reserve is whole

    run_virtual(main())


@pytest.mark.anyio
async def test_a_hedge_that_never_got_a_slot_spends_no_budget() -> None:
    """One replica with one slot, hedging on: the hedge waits for the slot its own request holds, and is
    cancelled when that request answers. It never went out, so the budget must not count it."""
    gate = asyncio.Event()
    sent: list[ScoreBatch] = []

    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(batch)
        await gate.wait()
        return [1.0] * len(batch)

    policy = DispatchPolicy(hedge=True, hedge_delay_s=0.05, hedges=1)
    batcher, state, budget, stats = one_replica(send, policy, cap=1)
    task = asyncio.create_task(batcher.score("q", ["d1"], clock.now() + 30.0))
    await until(lambda: len(state.limiter._waiters) == 1)  # the hedge waits behind its own request
    gate.set()
    assert (await task).ranking is not None
    await until(lambda: batcher.idle and not state.limiter._waiters)
    assert len(sent) == 1 and stats.snapshot().hedges == 0 and state.limiter.in_flight == 0
    assert budget.try_spend() and budget.try_spend()  # the reserve is whole: no hedge went out


@pytest.mark.anyio
async def test_a_failover_that_waited_for_a_slot_never_undercuts_the_new_replicas_retry_after() -> None:
    """A request whose replica A is inside a Retry-After fails over to B, and waits there for B's one slot.
    While it waits, B answers the request holding that slot with a 429 and a Retry-After of 30 s. The slot
    then comes to our request: it must not be sent to B before the time B asked for (the deadline is
    sooner, so it falls back as rate limited). It once went out to B at once."""
    loop = asyncio.get_running_loop()
    sent_to: list[str] = []

    def sender(name: str) -> Callable[..., object]:
        async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
            sent_to.append(name)
            return [1.0] * len(batch)
        return send

    a, b = (EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy(cooldown=60))) for _ in range(2))
    replicas = ReplicaSet([Replica("http://a", a, sender("a")), Replica("http://b", b, sender("b"))],
                          budget=RetryBudget())
    dispatch = Dispatch(replicas, StatsRecorder(), DispatchPolicy())
    job = Job(query="q", documents=["d1"], deadline=clock.now() + 10.0, future=loop.create_future())
    plan = Plan(batch=ScoreBatch(queries=("q",), pairs=((0, "d1"),)), routes={("q", "d1"): [job]})
    plan.replica, plan.lease = replicas.replicas[0], a.limiter.take(plan)  # the batcher gave it A's slot
    a.hold_off(clock.now() + 30.0)  # then another request to A was answered with a 429
    other = b.limiter.take("another request")  # B's one slot is taken
    task = asyncio.create_task(dispatch.carry_out(plan))
    await until(lambda: len(b.limiter._waiters) == 1)  # ours waits for B's slot
    b.hold_off(clock.now() + 30.0)  # the other request's answer: a 429, Retry-After 30 s
    other.release()
    with pytest.raises(RateLimited):
        await task
    assert sent_to == [] and a.limiter.in_flight == 0
    assert b.limiter.in_flight == 1 and plan.lease is not None and plan.lease.held  # ours, given back by its task


def two_replicas(send_a: Callable[..., object], send_b: Callable[..., object], policy: DispatchPolicy
                 ) -> tuple[MicroBatcher, EndpointState, EndpointState, RetryBudget, StatsRecorder]:
    """Replicas ``a`` and ``b`` of one slot each; the balancer always draws ``a`` first."""
    a, b = (EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy(cooldown=60))) for _ in range(2))
    budget = RetryBudget(ratio=0.2, reserve=2)
    stats = StatsRecorder()
    replicas = ReplicaSet([Replica("http://a", a, send_a), Replica("http://b", b, send_b)], budget=budget)
    replicas._rng.sample = lambda members, k: list(members)[:k]  # type: ignore[method-assign]
    batcher = MicroBatcher(Dispatch(replicas, stats, policy), mixes_queries=True, max_pairs=100, window=0.01,
                           max_queued_pairs=1000, shed=False)
    return batcher, a, b, budget, stats


def test_a_failover_that_finds_no_free_slot_before_the_deadline_spends_no_budget() -> None:
    """``a`` fails with a 503; ``b`` can take the request, but its one slot stays taken by another request up to
    the deadline. The retry never went out: the budget is whole and no retry is counted (it once spent the
    reserve and counted a retry for a request that was only waiting in our own queue for a slot)."""
    sent: list[str] = []

    def sender(name: str, answer: Callable[[ScoreBatch], list[float]]) -> Callable[..., object]:
        async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
            sent.append(name)
            return answer(batch)
        return send

    def busy(batch: ScoreBatch) -> list[float]:
        raise ServerError(503, "busy")

    async def main() -> None:
        batcher, a, b, budget, stats = two_replicas(sender("a", busy), sender("b", lambda batch: [1.0] * len(batch)),
                                                    DispatchPolicy(max_retries=2))
        other = b.limiter.take("another request")  # b's slot, held past the deadline
        with pytest.raises(RerankError):
            await batcher.score("q", ["d1", "d2"], clock.now() + 0.5)
        await until(lambda: batcher.idle)
        assert sent == ["a"] and a.limiter.in_flight == 0 and b.limiter.in_flight == 1  # only the other's
        other.release()
        assert stats.snapshot().retries == 0
        assert budget.try_spend() and budget.try_spend()  # the reserve is whole

    run_virtual(main())


def test_a_caller_leaving_while_its_request_waits_out_a_backoff_gets_the_budget_back() -> None:
    """The first attempt fails with a 503 and the retry waits its backoff; the only caller leaves during that wait.
    The request is cancelled before the retry goes out: nothing was sent again, so nothing is spent or counted."""
    sent: list[ScoreBatch] = []

    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(batch)
        raise ServerError(503, "busy")

    async def main() -> None:
        policy = DispatchPolicy(max_retries=2, backoff_base_s=2.0, backoff_cap_s=2.0)  # a backoff of 1-2 s
        batcher, state, budget, stats = one_replica(send, policy)
        caller = asyncio.create_task(batcher.score("q", ["d1", "d2"], clock.now() + 30.0))
        await until(lambda: len(sent) == 1)
        await asyncio.sleep(0.5)  # virtual: inside the backoff
        assert len(sent) == 1 and not caller.done()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await until(lambda: batcher.idle)
        assert len(sent) == 1 and state.limiter.in_flight == 0 and stats.snapshot().retries == 0
        assert budget.try_spend() and budget.try_spend()  # the reserve is whole

    run_virtual(main())
