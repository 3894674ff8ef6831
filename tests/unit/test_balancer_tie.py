"""The dispatcher waits for the slot of the replica it draws, and every request behind waits with it: a replica
with a free slot must win over one whose slots are taken. Before any replica was measured, their costs tied
(``EndpointState.cost``); once measured, speed times load could favour the full one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from support.loop_steps import until
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import WARM_UP_ANSWERS, EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.statistics import StatsRecorder

pytestmark = pytest.mark.anyio


async def test_an_idle_replica_is_preferred_to_one_whose_only_slot_is_taken() -> None:
    gate = asyncio.Event()
    sent_to: list[str] = []

    def sender(name: str, held: bool) -> Callable[..., object]:
        async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
            sent_to.append(name)
            if held:
                await gate.wait()
            return [1.0] * len(batch)
        return send

    a, b = (EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy(cooldown=60))) for _ in range(2))
    replicas = ReplicaSet([Replica("http://a", a, sender("a", True)), Replica("http://b", b, sender("b", False))],
                          budget=RetryBudget())
    replicas._rng.sample = lambda members, k: list(members)[:k]  # type: ignore[method-assign]  # draws a, then b
    batcher = MicroBatcher(Dispatch(replicas, StatsRecorder(), DispatchPolicy()), mixes_queries=False,
                           max_pairs=100, window=0.01, max_queued_pairs=1000)
    first = asyncio.create_task(batcher.score("q1", ["d1"], clock.now() + 30.0))  # one pair, held at a
    await until(lambda: sent_to == ["a"] and a.outstanding_pairs == 1)
    assert b.limiter.in_flight == 0  # b is idle, a's only slot is taken
    second = await batcher.score("q2", ["d1", "d2"], clock.now() + 0.5)
    assert second.ranking is not None and second.answered_by == "http://b"
    gate.set()
    await first


async def test_a_replica_with_a_free_slot_is_preferred_to_a_faster_one_whose_slots_are_taken() -> None:
    """Measured: a answers four times as fast as b. With a's only slot taken, a request waiting for it would hold up
    every request behind it in the dispatcher, while b could start it at once (Ray Serve's power-of-two scheduler
    likewise passes over replicas at their cap). Speed times load still favoured a (2 x 1 against 1 x 4)."""
    gate = asyncio.Event()
    sent_to: list[str] = []

    def sender(name: str) -> Callable[..., object]:
        async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
            sent_to.append(name)
            if name == "a":
                await gate.wait()
            return [1.0] * len(batch)
        return send

    a, b = (EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy(cooldown=60))) for _ in range(2))
    for _ in range(WARM_UP_ANSWERS):
        a.answered(0.01, 1)
        b.answered(0.04, 1)
    members = [Replica("http://a", a, sender("a")), Replica("http://b", b, sender("b"))]
    replicas = ReplicaSet(members, budget=RetryBudget())
    assert replicas.cost(members[0]) * 2 < replicas.cost(members[1])  # with a's one pair in flight, a costs less
    batcher = MicroBatcher(Dispatch(replicas, StatsRecorder(), DispatchPolicy()), mixes_queries=False,
                           max_pairs=100, window=0.01, max_queued_pairs=1000)
    replicas._rng.sample = lambda members, k: list(members)[:k]  # type: ignore[method-assign]  # draws a first
    first = asyncio.create_task(batcher.score("q1", ["d1"], clock.now() + 30.0))  # one pair, held at a
    await until(lambda: sent_to == ["a"] and a.limiter.in_flight == 1)
    second = await batcher.score("q2", ["d1"], clock.now() + 0.5)
    assert second.ranking is not None and second.answered_by == "http://b" and sent_to == ["a", "b"]
    await until(lambda: b.limiter.in_flight == 0)  # b's slot comes back as its request's task ends
    assert a.limiter.in_flight == 1  # still q1's
    gate.set()
    assert (await first).answered_by == "http://a"


async def test_a_replica_failing_lately_is_not_preferred_for_its_free_slot() -> None:
    """A failing replica's slots free up as fast as it fails: its room says nothing, and the request waits for the
    healthy replica's slot instead."""
    healthy, failing = (EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy(cooldown=60))) for _ in range(2))
    failing.failed()
    async def unused(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        raise AssertionError("only a slot is asked for")

    replicas = ReplicaSet([Replica("http://failing", failing, unused), Replica("http://healthy", healthy, unused)],
                          budget=RetryBudget())
    held = healthy.limiter.take("an earlier request")
    acquired = asyncio.create_task(replicas.acquire("a request"))
    await until(lambda: not healthy.limiter.has_room() and bool(healthy.limiter._waiters))
    assert not acquired.done() and failing.limiter.in_flight == 0
    held.release()
    replica, lease = await acquired
    assert replica.url == "http://healthy" and lease.held
    lease.release()
