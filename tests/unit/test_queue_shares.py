"""Sharing a queue out over idle replicas: ``take`` stops at a share in whole jobs, the replica set
says which idle members to share with and how fast each is. Real queue, real replica states."""

from __future__ import annotations

import asyncio

import pytest

from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState
from usr.plugins.a0_reranker.batching.jobs import Job
from usr.plugins.a0_reranker.batching.limiter import EndpointLimiter
from usr.plugins.a0_reranker.batching.plans import PendingQueue
from usr.plugins.a0_reranker.batching.replicas import Replica, ReplicaSet
from usr.plugins.a0_reranker.batching.retry_budget import RetryBudget
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


def taken_jobs(batch: ScoreBatch) -> list[int]:
    return sorted({int(batch.queries[qi][1:]) for qi, _ in batch.pairs})


async def test_a_share_stops_before_the_next_job_and_never_splits_one() -> None:
    queue = queue_of(4, 4, 4, 4, 4)
    first = queue.take(max_pairs=100, mixes_queries=True, share=6)
    assert first is not None and taken_jobs(first.batch) == [0, 1]  # 8 pairs: the second job is whole
    second = queue.take(max_pairs=100, mixes_queries=True, share=4)
    assert second is not None and taken_jobs(second.batch) == [2]
    rest = queue.take(max_pairs=100, mixes_queries=True)
    assert rest is not None and taken_jobs(rest.batch) == [3, 4] and not queue


async def test_max_pairs_still_bounds_a_share() -> None:
    queue = queue_of(30)
    plan = queue.take(max_pairs=10, mixes_queries=True, share=25)
    assert plan is not None and len(plan.batch.pairs) == 10 and queue.pairs == 20


def replica(name: str, seconds_per_pair: float | None = None, cap: int = 4) -> Replica:
    state = EndpointState(EndpointLimiter(cap), CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=60)))
    if seconds_per_pair is not None:
        state.answered(seconds_per_pair * 10, 10)

    async def send(batch: ScoreBatch, deadline: float, fresh: bool) -> list[float]:
        return [0.0] * len(batch.pairs)

    return Replica(f"http://{name}", state, send)


def test_speeds_are_pairs_per_second_and_an_unmeasured_member_counts_as_the_fastest() -> None:
    fast, slow, new = replica("fast", 0.001), replica("slow", 0.004), replica("new")
    assert ReplicaSet.speeds([fast, slow, new]) == pytest.approx([1000.0, 250.0, 1000.0])
    assert ReplicaSet.speeds([replica("a"), replica("b")]) == [1.0, 1.0]


async def test_idle_peers_are_the_ready_members_with_nothing_in_flight_that_cost_no_more() -> None:
    chosen, idle, busy, ejected, failing = (replica(n, 0.001) for n in ("chosen", "idle", "busy", "out", "failing"))
    members = ReplicaSet([chosen, idle, busy, ejected, failing], budget=RetryBudget())
    chosen.state.limiter.take()  # the slot the dispatcher holds
    busy.state.limiter.take()
    with pytest.raises(TransportError), ejected.state.breaker.attempt():
        raise TransportError("connection refused: the one failure its breaker allows")
    for _ in range(5):
        failing.state.failed()
    assert ejected.state.breaker.state == "open"
    assert members.idle_peers(chosen, pairs=100) == [idle, failing]  # the queue would cost more on chosen
    assert members.idle_peers(chosen, pairs=2) == [idle]  # a failing replica costs more than 3 pairs there
