"""Before any replica is measured, the balancer's cost of a replica with one pair in flight tied with an idle one's
(``EndpointState.cost``), so the dispatcher could wait for the busy replica's only slot while the other replica sat
idle, and the recall fell back at its deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from support.loop_steps import until
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
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
