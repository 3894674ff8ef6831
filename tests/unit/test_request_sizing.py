"""Requests sized to what a replica answers by the most urgent recall's deadline: a request is cut only when
another replica would answer the rest in time, so sizes never get pinned small by a pace learnt from small
requests; and a peer's share is judged by the recall it starts with. Each test drives the real batcher, dispatch
step, limiter and endpoint state on the virtual clock (``support.virtual_time``), with the servers modelled by the
test's ``send``."""

from __future__ import annotations

import asyncio
import collections
import random
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


def paced(url: str, seconds_per_pair: float, slots: int, sent: list[str]) -> Replica:
    """A replica that answers a request after ``seconds_per_pair`` a pair (side by side), ``slots`` slots of ours."""
    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(f"{batch.queries[0]}..{batch.queries[-1]}:{len(batch)}")
        await asyncio.sleep(seconds_per_pair * len(batch))
        return [1.0] * len(batch)

    return Replica(url, EndpointState(EndpointLimiter(slots), CircuitBreaker(BreakerPolicy())), send)


def gpu(url: str, pass_s: float, seconds_per_pair: float, slots: int, sizes: list[int]) -> Replica:
    """A GPU server: one pass at a time, each ``pass_s`` plus ``seconds_per_pair`` a pair (a batch of 100 costs
    little more than one of 5: what micro-batching is for)."""
    gate: list[asyncio.Lock] = []

    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        gate.append(gate[0] if gate else asyncio.Lock())
        sizes.append(len(batch))
        async with gate[0]:
            await asyncio.sleep(pass_s + seconds_per_pair * len(batch))
        return [1.0] * len(batch)

    return Replica(url, EndpointState(EndpointLimiter(slots), CircuitBreaker(BreakerPolicy())), send)


def batcher_of(*replicas: Replica, max_pairs: int = 100) -> MicroBatcher:
    dispatch = Dispatch(ReplicaSet(replicas, budget=RetryBudget()), StatsRecorder(), DispatchPolicy())
    dispatch.replicas._rng = random.Random(7)  # the draw's tie-break, fixed: the same run every time
    return MicroBatcher(dispatch, mixes_queries=True, max_pairs=max_pairs, window=0.01, max_queued_pairs=100_000)


async def steady_load(batcher: MicroBatcher, *, every_s: float, pairs: int, timeout_s: float,
                      for_s: float) -> collections.Counter[str]:
    """A recall of ``pairs`` every ``every_s`` for ``for_s``, each due ``timeout_s`` after it came: their outcomes."""
    calls = []
    start = clock.now()
    while clock.now() - start < for_s:
        calls.append(asyncio.create_task(outcome(batcher, f"q{len(calls)}", pairs, clock.now() + timeout_s)))
        await asyncio.sleep(every_s)
    return collections.Counter(await asyncio.gather(*calls))


def test_a_second_gpu_replica_does_not_cut_what_is_reranked_by_pinning_requests_small() -> None:
    """Two GPU servers, each a pass of 0.1 s plus 0.5 ms a pair, two slots each; a recall of 5 pairs every 5 ms
    (1,000 pairs a second), due in 0.5 s. With requests of up to 100 pairs (0.15 s a pass) the pair serves 1,333
    pairs a second (before requests were sized: 574 of 601 reranked; one such server alone: 120). The first requests
    go out small and teach a pace per pair of ~20 ms (the pass's cost over 5-8 pairs). Sizing every request to what
    that pace answers by the deadline (~10-18 pairs) kept requests too small to show the true pace: 89 reranked.
    The other replica, as busy and as slow by that pace, would not answer the rest in time: no cut."""
    sizes: list[int] = []

    async def main() -> collections.Counter[str]:
        both = batcher_of(gpu("http://a", 0.1, 0.0005, 2, sizes), gpu("http://b", 0.1, 0.0005, 2, sizes))
        return await steady_load(both, every_s=0.005, pairs=5, timeout_s=0.5, for_s=3.0)

    outcomes = run_virtual(main())
    offered = sum(outcomes.values())
    mean_size = round(sum(sizes) / len(sizes), 1)
    assert outcomes["reranked"] >= 0.8 * offered, (dict(outcomes), "requests", len(sizes), "mean pairs", mean_size)


def test_a_slow_peer_kept_for_an_urgent_small_recall_is_not_handed_the_rest_of_a_large_one() -> None:
    """fast answers a pair in 1 ms, slow in 50 ms; four slots each; max_pairs 64. "tiny" (1 pair), "big1" (50) and
    "big2" (49) come together, due in 1 s. fast is drawn; slow is a peer short of work, with a share of ~2 pairs,
    and kept because it answers the most urgent recall ("tiny", 50 ms) in time. fast takes tiny, big1 and 13 pairs
    of big2 (64); slow's share then starts at the 36 pairs left of big2, which ``take`` hands over whole (a first
    job larger than the share) and ``_fits`` does not cut (it never goes below the first job's pairs): 1.8 s for a
    recall due in 1 s, which fast, with three slots free, would have answered in 36 ms. A peer is now judged by the
    recall its share starts with, once the takes before it are made."""
    fast_sent: list[str] = []
    slow_sent: list[str] = []
    fast, slow = paced("http://fast", 0.001, 4, fast_sent), paced("http://slow", 0.05, 4, slow_sent)

    async def main() -> list[str]:
        for n in range(6):  # each measured past its warm-up by recalls of settings that reach it alone
            assert await outcome(batcher_of(slow), f"s{n}", 2, clock.now() + 30.0) == "reranked"
        for n in range(6):
            assert await outcome(batcher_of(fast), f"f{n}", 2, clock.now() + 30.0) == "reranked"
        both = batcher_of(fast, slow, max_pairs=64)
        deadline = clock.now() + 1.0
        return list(await asyncio.gather(outcome(both, "tiny", 1, deadline), outcome(both, "big1", 50, deadline),
                                         outcome(both, "big2", 49, deadline)))

    outcomes = run_virtual(main())
    assert outcomes == ["reranked"] * 3, (outcomes, "slow got", slow_sent[6:], "fast got", fast_sent[6:])
