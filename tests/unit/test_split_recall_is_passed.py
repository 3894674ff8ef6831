"""An admitted recall keeps its answer. A recall due sooner goes ahead of a queued one only when the
passed one still fits (``_admit``'s second rule), but that rule skipped every queued job that was ``sent``: a
recall larger than ``max_pairs`` goes out in parts, and its unsent rest, still queued, was passed unchecked."""

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

PAIR_S = 0.01


class OneGpu:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()

    async def send(self, batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        async with self.lock:
            await asyncio.sleep(PAIR_S * len(batch))
        return [1.0] * len(batch)


def engine() -> MicroBatcher:
    state = EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy()))
    return MicroBatcher(Dispatch(ReplicaSet([Replica("gpu", state, OneGpu().send)], budget=RetryBudget()),
                                 StatsRecorder(), DispatchPolicy()),
                        mixes_queries=True, max_pairs=10, window=0.01, max_queued_pairs=1000)


async def scenario(urgent: bool) -> tuple[str, str]:
    batcher = engine()
    for n in range(5):  # the pace is learnt: 10 ms a pair
        assert await outcome(batcher, f"warm{n}", 10, clock.now() + 30.0) == "reranked"
    await asyncio.sleep(1.0)
    start = clock.now()
    long = asyncio.create_task(outcome(batcher, "long", 30, start + 0.34))  # 3 requests of 10: 0.3 s alone
    await asyncio.sleep(0.08)  # its first part is at the server, the other 20 pairs queued
    short = "not asked"
    if urgent:
        short = await outcome(batcher, "short", 5, start + 0.30)
    return await long, short


def test_the_long_recall_alone_is_reranked() -> None:
    assert run_virtual(scenario(urgent=False))[0] == "reranked"


def test_a_recall_due_sooner_does_not_make_an_admitted_split_recall_miss_its_deadline() -> None:
    long, short = run_virtual(scenario(urgent=True))
    assert long == "reranked", f"the admitted recall: {long}; the one that passed it: {short}"
