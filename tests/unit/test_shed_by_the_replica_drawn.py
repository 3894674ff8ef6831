"""A recall is shed only when no replica with room could answer it in time. The balancer's cost fades while a
replica is not asked (``seconds_per_pair_now``), so a slow replica left alone a while is drawn again. The dispatcher
used to shed every queued recall that this slow replica could not answer in time, although a fast idle replica would
have answered it at once: nothing was sent, nothing measured, the slow replica stayed the cheaper, and every recall
fell back. The dispatcher now sends such a recall to the replica that can answer it."""

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
from usr.plugins.a0_reranker.core.errors import Overloaded
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


def server(seconds_per_pair: float, sent: list[int]) -> Callable[..., object]:
    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(len(batch))
        await asyncio.sleep(seconds_per_pair * len(batch))
        return [1.0] * len(batch)
    return send


def batcher_of(*replicas: Replica) -> MicroBatcher:
    return MicroBatcher(Dispatch(ReplicaSet(replicas, budget=RetryBudget()), StatsRecorder(), DispatchPolicy()),
                        mixes_queries=True, max_pairs=100, window=0.01, max_queued_pairs=1000)


def test_recalls_are_not_shed_by_a_slow_replica_while_a_fast_one_is_idle() -> None:
    async def main() -> None:
        slow_sent: list[int] = []
        fast_sent: list[int] = []
        slow = Replica("http://slow", EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy())),
                       server(0.5, slow_sent))
        fast = Replica("http://fast", EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy())),
                       server(0.005, fast_sent))
        # Both servers measured (past their warm-up answers) by recalls of settings that reach only one of them.
        for n in range(6):
            assert (await batcher_of(slow).score(f"q{n}", ["d1", "d2"], clock.now() + 30.0)).ranking is not None
        await asyncio.sleep(40.0)  # the slow one is not asked for a while
        for n in range(6):
            assert (await batcher_of(fast).score(f"q{n}", ["d1", "d2"], clock.now() + 30.0)).ranking is not None
        both = batcher_of(slow, fast)
        shed = 0
        for n in range(5):  # recalls with a 0.5 s timeout: the fast one answers them in 10 ms
            try:
                result = await both.score(f"r{n}", ["d1", "d2"], clock.now() + 0.5)
                assert result.ranking is not None
            except Overloaded:
                shed += 1
            await asyncio.sleep(2.0)
        assert shed == 0, f"{shed} of 5 recalls shed, the fast replica idle (it got {len(fast_sent) - 6} of them)"

    run_virtual(main())
