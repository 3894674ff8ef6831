"""Sharing a queue out over idle replicas: ``take`` fills a share (splitting the job at its edge), the replica set
says which idle members to share with and how fast each is. Real queue, real replica states."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import WARM_UP_ANSWERS, EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter, Job, PendingQueue
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import TransportError

pytestmark = pytest.mark.anyio


def queue_of(*sizes: int) -> PendingQueue:
    queue = PendingQueue()
    loop = asyncio.get_running_loop()
    for n, size in enumerate(sizes):
        queue.add(Job(query=f"q{n}", documents=[f"d{n}.{k}" for k in range(size)], deadline=1e12,
                      future=loop.create_future()))
    return queue


def pairs_of(batch: ScoreBatch) -> dict[int, int]:
    """Pairs taken per job."""
    counts: dict[int, int] = {}
    for qi, _ in batch.pairs:
        job = int(batch.queries[qi][1:])
        counts[job] = counts.get(job, 0) + 1
    return counts


async def test_a_share_takes_whole_jobs_then_the_part_of_the_next_that_fills_it() -> None:
    queue = queue_of(4, 4, 4, 4, 4)
    first = queue.take(max_pairs=100, mixes_queries=True, share=6)
    assert first is not None and pairs_of(first.batch) == {0: 4, 1: 2}  # the second job split at the share
    second = queue.take(max_pairs=100, mixes_queries=True, share=4)
    assert second is not None and pairs_of(second.batch) == {1: 2, 2: 2}
    rest = queue.take(max_pairs=100, mixes_queries=True)
    assert rest is not None and pairs_of(rest.batch) == {2: 2, 3: 4, 4: 4} and not queue


async def test_a_first_job_larger_than_the_share_is_taken_whole() -> None:
    queue = queue_of(10, 4)
    plan = queue.take(max_pairs=100, mixes_queries=True, share=3)
    assert plan is not None and pairs_of(plan.batch) == {0: 10} and queue.pairs == 4  # a lone recall is never split


async def test_max_pairs_still_bounds_a_share() -> None:
    queue = queue_of(30)
    plan = queue.take(max_pairs=10, mixes_queries=True, share=25)
    assert plan is not None and len(plan.batch.pairs) == 10 and queue.pairs == 20


def replica(name: str, seconds_per_pair: float | None = None, cap: int = 4) -> Replica:
    state = EndpointState(EndpointLimiter(cap), CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=60)))
    if seconds_per_pair is not None:
        for _ in range(WARM_UP_ANSWERS):  # past its warm-up: the speed is a measure of it
            state.answered(seconds_per_pair * 10, 10)

    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        return [0.0] * len(batch.pairs)

    return Replica(f"http://{name}", state, send)


def test_a_busy_replica_not_yet_measured_costs_more_than_an_idle_measured_one() -> None:
    measured, new = replica("measured", 0.001), replica("new")
    members = ReplicaSet([measured, new], budget=RetryBudget())
    assert members.cost(new) == pytest.approx(members.cost(measured), rel=1e-3)  # as fast as the fastest
    new.state.outstanding_pairs = 4
    assert members.cost(new) > 4 * members.cost(measured)  # its load counts: it is no free choice


async def test_peers_short_of_work_are_the_ready_members_with_under_two_in_flight_that_cost_no_more() -> None:
    names = ("chosen", "idle", "one", "two", "out", "failing")
    chosen, idle, one, two, ejected, failing = (replica(n, 0.001) for n in names)
    members = ReplicaSet([chosen, idle, one, two, ejected, failing], budget=RetryBudget())
    chosen.state.limiter.take("the dispatcher")  # the slot the dispatcher holds
    one.state.limiter.take("a request")  # its GPU busy, nothing waiting behind: it would idle once this pass ends
    two.state.limiter.take("a request")
    two.state.limiter.take("another request")  # one waits behind the running one: it has work for now
    with pytest.raises(TransportError), ejected.state.breaker.attempt():
        raise TransportError("connection refused: the one failure its breaker allows")
    for _ in range(5):
        failing.state.failed()
    assert ejected.state.breaker.state == "open"
    assert [r.state.short_of_work for r in (idle, one, two)] == [True, True, False]
    assert failing.state.recent_failures() > 0.1 and not failing.state.short_of_work  # failing, not short of work
    assert members.peers_short_of_work(chosen, pairs=100) == [idle, one]  # the queue would cost more on chosen


async def test_the_queue_serves_the_earliest_deadline_first_and_counts_what_is_due_before_a_recall() -> None:
    """A 5 s agent's recalls, then a 1 s agent's: the short one goes out first, and admitting a recall counts
    only the pairs due no later than it (with one timeout, deadlines come in order: first come, first served)."""
    queue = PendingQueue()
    loop = asyncio.get_running_loop()
    for n, deadline in enumerate((105.0, 105.5, 101.0, 105.5)):
        queue.add(Job(query=f"q{n}", documents=[f"d{n}.{k}" for k in range(n + 1)], deadline=deadline,
                      future=loop.create_future()))
    assert (queue.pairs_due_by(101.0), queue.pairs_due_by(105.0), queue.pairs_due_by(200.0)) == (3, 4, 10)
    taken = []
    while (plan := queue.take(max_pairs=64, mixes_queries=False)) is not None:
        taken.append(plan.batch.queries[0])
    assert taken == ["q2", "q0", "q1", "q3"]
