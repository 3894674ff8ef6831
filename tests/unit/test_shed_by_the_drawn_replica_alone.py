"""A recall is shed only when no replica could answer it in time. ``_in_time`` swaps a drawn replica
that cannot answer the *most urgent* recall for one that can, but ``_shed_hopeless`` then judged *every* queued
recall by the drawn replica alone: a large recall queued beside a small urgent one was shed because the slow
replica drawn (its balancer cost faded while it was not asked) could not answer it, while a fast one sat idle."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import Overloaded, RerankError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


def server(seconds_per_pair: float, sent: list[int]) -> Callable[..., object]:
    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(len(batch))
        await asyncio.sleep(seconds_per_pair * len(batch))
        return [1.0] * len(batch)
    return send


def batcher_of(*replicas: Replica) -> MicroBatcher:
    return MicroBatcher(Dispatch(ReplicaSet(replicas, budget=RetryBudget()), StatsRecorder(), DispatchPolicy()),
                        mixes_queries=True, max_pairs=256, window=0.01, max_queued_pairs=10_000)


async def outcome(batcher: MicroBatcher, query: str, documents: int, deadline: float) -> str:
    try:
        await batcher.score(query, [f"{query} memory {k}" for k in range(documents)], deadline)
        return "reranked"
    except RerankError as exc:
        return "overload" if isinstance(exc, Overloaded) else exc.reason


def test_a_large_recall_is_not_shed_by_the_slow_replica_drawn_while_a_fast_one_is_idle() -> None:
    slow_sent: list[int] = []
    fast_sent: list[int] = []
    slow = Replica("http://slow", EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy())),
                   server(0.01, slow_sent))
    fast = Replica("http://fast", EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy())),
                   server(0.0005, fast_sent))

    async def main() -> list[str]:
        for n in range(6):
            assert await outcome(batcher_of(slow), f"s{n}", 2, clock.now() + 30.0) == "reranked"
        await asyncio.sleep(40.0)  # the slow one is not asked for a while: its balancer cost fades
        for n in range(6):
            assert await outcome(batcher_of(fast), f"f{n}", 2, clock.now() + 30.0) == "reranked"
        both = batcher_of(slow, fast)
        deadline = clock.now() + 1.0  # the fast replica answers 200 pairs in 0.1 s, the slow one in 2 s
        return await asyncio.gather(outcome(both, "small", 2, deadline), outcome(both, "large", 200, deadline))

    outcomes = run_virtual(main())
    assert outcomes == ["reranked", "reranked"], (outcomes, "slow got", slow_sent[6:], "fast got", fast_sent[6:])
