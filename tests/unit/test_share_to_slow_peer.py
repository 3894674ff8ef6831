"""A share of a burst goes to a peer only as far as it finishes with the others. When the cheapest
replica's share was cut at ``max_pairs``, the rest of the queue was shared over the members after it alone: the
slow peer took a whole request of it, which it is known to need seconds for, while the recalls it carried had
one second; the fast replica, which would answer all of them in a fifth of that, was left short."""

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
                        mixes_queries=True, max_pairs=64, window=0.01, max_queued_pairs=10_000)


async def outcome(batcher: MicroBatcher, query: str, deadline: float) -> str:
    try:
        await batcher.score(query, [f"{query} memory {k}" for k in range(20)], deadline)
        return "reranked"
    except RerankError as exc:
        return "overload" if isinstance(exc, Overloaded) else exc.reason


def test_a_burst_the_fast_replica_answers_in_time_is_not_sent_to_a_slow_one_that_cannot() -> None:
    slow_sent: list[int] = []
    fast_sent: list[int] = []
    slow = Replica("http://slow", EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy())),
                   server(0.05, slow_sent))  # 1 s a recall of 20
    fast = Replica("http://fast", EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy())),
                   server(0.001, fast_sent))  # 20 ms a recall of 20

    async def main() -> list[str]:
        for n in range(6):  # both measured, past their warm-up
            assert await outcome(batcher_of(slow), f"s{n}", clock.now() + 30.0) == "reranked"
            assert await outcome(batcher_of(fast), f"f{n}", clock.now() + 30.0) == "reranked"
        both = batcher_of(slow, fast)
        deadline = clock.now() + 1.0
        return await asyncio.gather(*(outcome(both, f"r{n}", deadline) for n in range(10)))

    outcomes = run_virtual(main())
    assert outcomes == ["reranked"] * 10, (outcomes, "slow got", slow_sent[6:], "fast got", fast_sent[6:])
