"""A failover is counted as it goes out, not when it gets the other replica's slot.
"One dispatch step's retries and failovers, each counted as it goes out" (retries.py): a failover that never
went out must not be counted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from support.loop_steps import until
from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter, Job, Plan
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import RateLimited, ServerError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


def sender(name: str, sent_to: list[str], answer: Callable[[ScoreBatch], list[float]] | None = None
           ) -> Callable[..., object]:
    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent_to.append(name)
        if answer is not None:
            return answer(batch)
        return [1.0] * len(batch)
    return send


@pytest.mark.anyio
async def test_a_failover_held_back_by_the_new_replicas_retry_after_is_not_counted() -> None:
    """The scenario of test_retry_budget_edges' Retry-After failover: A is held back by a Retry-After, the request
    fails over to B and waits for B's one slot; B is then held back too, and the request falls back as rate limited
    with nothing sent anywhere. No failover went out, yet ``failovers`` says one did."""
    loop = asyncio.get_running_loop()
    sent_to: list[str] = []
    a, b = (EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy(cooldown=60))) for _ in range(2))
    replicas = ReplicaSet([Replica("http://a", a, sender("a", sent_to)), Replica("http://b", b, sender("b", sent_to))],
                          budget=RetryBudget())
    stats = StatsRecorder()
    dispatch = Dispatch(replicas, stats, DispatchPolicy())
    job = Job(query="q", documents=["d1"], deadline=clock.now() + 10.0, future=loop.create_future())
    plan = Plan(batch=ScoreBatch(queries=("q",), pairs=((0, "d1"),)), routes={("q", "d1"): [job]})
    plan.replica, plan.lease = replicas.replicas[0], a.limiter.take(plan)
    a.hold_off(clock.now() + 30.0)
    other = b.limiter.take("another request")
    task = asyncio.create_task(dispatch.carry_out(plan))
    await until(lambda: len(b.limiter._waiters) == 1)
    b.hold_off(clock.now() + 30.0)
    other.release()
    with pytest.raises(RateLimited):
        await task
    plan.lease.release()
    assert sent_to == []  # nothing went out, to either replica
    assert stats.snapshot().failovers == 0, "a failover was counted that never went out"


def test_a_failover_whose_caller_left_while_it_waited_for_the_slot_is_not_counted() -> None:
    """A answers 503; the retry fails over to B, whose one slot is taken. While it waits, its only caller leaves
    (its own task is cancelled and cancels the plan). When B's slot frees at the same instant, the failover never
    goes out: the retry is not counted and its budget refunded, but the failover is counted."""
    from usr.plugins.a0_reranker.batching.batcher import MicroBatcher

    sent_to: list[str] = []

    def busy(batch: ScoreBatch) -> list[float]:
        raise ServerError(503, "busy")

    async def main() -> None:
        a, b = (EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy(cooldown=60))) for _ in range(2))
        stats = StatsRecorder()
        replicas = ReplicaSet([Replica("http://a", a, sender("a", sent_to, busy)),
                               Replica("http://b", b, sender("b", sent_to))], budget=RetryBudget())
        replicas._rng.sample = lambda members, k: list(members)[:k]  # type: ignore[method-assign]
        batcher = MicroBatcher(Dispatch(replicas, stats, DispatchPolicy(max_retries=2)), mixes_queries=True,
                               max_pairs=100, window=0.01, max_queued_pairs=1000, shed=False)
        other = b.limiter.take("another request")
        caller = asyncio.create_task(batcher.score("q", ["d1"], clock.now() + 30.0))
        await until(lambda: len(b.limiter._waiters) == 1)  # the failover waits for B's slot
        caller.cancel()
        other.release()  # the slot frees in the same instant the caller leaves
        with pytest.raises(asyncio.CancelledError):
            await caller
        await until(lambda: batcher.idle)
        assert sent_to == ["a"]
        snapshot = stats.snapshot()
        assert snapshot.retries == 0
        assert snapshot.failovers == 0, "a failover was counted that never went out"

    run_virtual(main())
