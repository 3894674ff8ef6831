"""A slow and a fast replica, each measured: no recall falls back that one of them could answer in time.

- The balancer's cost of a replica fades while it is not asked (``seconds_per_pair_now``), so a slow replica left
  alone a while is drawn again. The dispatcher used to shed every queued recall that this slow replica could not
  answer in time, although the fast one would have answered it at once: nothing was sent, nothing measured, the
  slow replica stayed the cheaper, and every recall fell back. Such a recall now goes to the replica that can.
- ``_in_time`` swaps the replica drawn only for the most urgent recall; ``_shed_hopeless`` then judged every queued
  recall by the replica drawn alone, and shed a large one queued beside a small urgent one. It now sheds only what
  no ready replica with a free slot could answer in time.
- A burst's shares were recomputed after each take: when the fast replica's share was cut at ``max_pairs``, the
  rest went to the slow replica after it, which needs seconds for a request of recalls that had one second. The
  shares are computed once; what a cut leaves stays queued for the fast one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from support.overload import outcome
from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.statistics import StatsRecorder

NOT_ASKED_S = 40.0  # long enough for a replica's balancer cost to fade below a fast one's


def replica(url: str, seconds_per_pair: float, sent: list[int]) -> Replica:
    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(len(batch))
        await asyncio.sleep(seconds_per_pair * len(batch))
        return [1.0] * len(batch)

    return Replica(url, EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy())), send)


def batcher_of(*replicas: Replica, max_pairs: int = 100) -> MicroBatcher:
    return MicroBatcher(Dispatch(ReplicaSet(replicas, budget=RetryBudget()), StatsRecorder(), DispatchPolicy()),
                        mixes_queries=True, max_pairs=max_pairs, window=0.01, max_queued_pairs=10_000)


async def measured(slow: Replica, fast: Replica, *, slow_left_alone: bool) -> None:
    """Each measured past its warm-up answers by recalls of settings that reach it alone; then, with
    ``slow_left_alone``, the slow one not asked while its balancer cost fades."""
    for n in range(6):
        assert await outcome(batcher_of(slow), f"s{n}", 2, clock.now() + 30.0) == "reranked"
    if slow_left_alone:
        await asyncio.sleep(NOT_ASKED_S)
    for n in range(6):
        assert await outcome(batcher_of(fast), f"f{n}", 2, clock.now() + 30.0) == "reranked"


def test_recalls_are_not_shed_by_a_slow_replica_while_a_fast_one_is_idle() -> None:
    slow_sent: list[int] = []
    fast_sent: list[int] = []
    slow, fast = replica("http://slow", 0.5, slow_sent), replica("http://fast", 0.005, fast_sent)

    async def main() -> list[str]:
        await measured(slow, fast, slow_left_alone=True)
        both, outcomes = batcher_of(slow, fast), []
        for n in range(5):  # recalls with a 0.5 s timeout: the fast one answers them in 10 ms
            outcomes.append(await outcome(both, f"r{n}", 2, clock.now() + 0.5))
            await asyncio.sleep(2.0)
        return outcomes

    outcomes = run_virtual(main())
    assert outcomes == ["reranked"] * 5, (outcomes, "slow got", slow_sent[6:], "fast got", fast_sent[6:])


def test_a_large_recall_is_not_shed_by_the_slow_replica_drawn_while_a_fast_one_is_idle() -> None:
    slow_sent: list[int] = []
    fast_sent: list[int] = []
    slow, fast = replica("http://slow", 0.01, slow_sent), replica("http://fast", 0.0005, fast_sent)

    async def main() -> list[str]:
        await measured(slow, fast, slow_left_alone=True)
        both = batcher_of(slow, fast, max_pairs=256)
        deadline = clock.now() + 1.0  # the fast replica answers 200 pairs in 0.1 s, the slow one in 2 s
        return await asyncio.gather(outcome(both, "small", 2, deadline), outcome(both, "large", 200, deadline))

    outcomes = run_virtual(main())
    assert outcomes == ["reranked", "reranked"], (outcomes, "slow got", slow_sent[6:], "fast got", fast_sent[6:])


def test_a_burst_the_fast_replica_answers_in_time_is_not_sent_to_a_slow_one_that_cannot() -> None:
    slow_sent: list[int] = []
    fast_sent: list[int] = []
    slow = replica("http://slow", 0.05, slow_sent)  # 1 s a recall of 20
    fast = replica("http://fast", 0.001, fast_sent)  # 20 ms a recall of 20

    async def main() -> list[str]:
        await measured(slow, fast, slow_left_alone=False)
        both = batcher_of(slow, fast, max_pairs=64)
        deadline = clock.now() + 1.0
        return await asyncio.gather(*(outcome(both, f"r{n}", 20, deadline) for n in range(10)))

    outcomes = run_virtual(main())
    assert outcomes == ["reranked"] * 10, (outcomes, "slow got", slow_sent[6:], "fast got", fast_sent[6:])
