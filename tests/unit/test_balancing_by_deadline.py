"""A recall goes to a replica that can answer it by its deadline while one can: the balancer draws among the replicas
that would answer the most urgent recall in time before it prefers one with a free slot, a share of a burst goes
to a peer only if it would answer it in time, and a recall is shed only when no ready replica (a full one
included) could answer it. Each test drives the real batcher, dispatch step, limiter and endpoint state on the
virtual clock (``support.virtual_time``), with the servers modelled by the test's ``send``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from support.loop_steps import until
from support.overload import outcome
from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter, Lease
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


def paced(url: str, seconds_per_pair: float, slots: int, sent: list[str]) -> Replica:
    """A replica that answers a request after ``seconds_per_pair`` a pair, with ``slots`` slots of ours."""
    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        queries = batch.queries[0] if len(batch.queries) == 1 else f"{batch.queries[0]}..{batch.queries[-1]}"
        sent.append(f"{queries}:{len(batch)}")  # the queries it carried and its pairs
        await asyncio.sleep(seconds_per_pair * len(batch))
        return [1.0] * len(batch)

    return Replica(url, EndpointState(EndpointLimiter(slots), CircuitBreaker(BreakerPolicy())), send)


def batcher_of(*replicas: Replica, mixes_queries: bool = False) -> MicroBatcher:
    return MicroBatcher(Dispatch(ReplicaSet(replicas, budget=RetryBudget()), StatsRecorder(), DispatchPolicy()),
                        mixes_queries=mixes_queries, max_pairs=100, window=0.01, max_queued_pairs=10_000)


def test_a_recall_the_fast_full_replica_answers_in_time_is_not_shed_for_a_slow_one_with_room() -> None:
    """Both replicas measured: fast answers a pair in 10 ms, slow in 0.5 s; one
    slot each. A recall of 2 holds fast's slot for 20 ms; a recall of 10 with 1 s then comes. Fast would answer it
    by 0.12 s; slow needs 5 s. Power of two choices used to pick fast (0.01 x 3 against 0.5 x 1) and wait 20 ms for
    its slot. Drawing among the replicas with room alone left slow, and the dispatcher shed the recall."""
    fast_sent: list[str] = []
    slow_sent: list[str] = []
    fast, slow = paced("http://fast", 0.01, 1, fast_sent), paced("http://slow", 0.5, 1, slow_sent)

    async def main() -> str:
        for n in range(6):  # each measured past its warm-up by recalls of settings that reach it alone
            assert await outcome(batcher_of(slow), f"s{n}", 2, clock.now() + 30.0) == "reranked"
        for n in range(6):
            assert await outcome(batcher_of(fast), f"f{n}", 2, clock.now() + 30.0) == "reranked"
        both = batcher_of(fast, slow)
        held = asyncio.create_task(outcome(both, "held", 2, clock.now() + 30.0))
        await until(lambda: fast_sent[-1:] == ["held:2"] and fast.state.limiter.in_flight == 1)
        urgent = await outcome(both, "urgent", 10, clock.now() + 1.0)
        assert await held == "reranked"
        return urgent

    urgent = run_virtual(main())
    assert urgent == "reranked", (urgent, "slow got", slow_sent[6:], "fast got", fast_sent[6:])


def test_a_recall_waiting_for_a_hung_replicas_slot_goes_to_the_other_once_that_one_frees() -> None:
    """One slot each. "hung" holds a's slot for 20 s (a server that stalls; the breaker learns nothing until it
    times out); "busy" holds b's for 0.1 s. "urgent" (1 s) comes while both are full, and the draw picks a (fewer
    pairs in flight). Waiting for a's slot alone, "urgent" and every recall queued behind it fell back at their
    deadline, though b was free from 0.1 s: the dispatcher now takes the first slot either frees."""
    sent: list[str] = []

    def replica(url: str) -> Replica:
        async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
            sent.append(f"{batch.queries[0]}@{url}")
            await asyncio.sleep({"hung": 20.0, "busy": 0.1}.get(batch.queries[0], 0.01))
            return [1.0] * len(batch)
        return Replica(url, EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy())), send)

    a, b = replica("a"), replica("b")

    async def main() -> str:
        both = batcher_of(a, b)
        both.dispatch.replicas._rng.sample = lambda members, k: list(members)[:k]  # type: ignore[method-assign]
        hung = asyncio.create_task(outcome(both, "hung", 1, clock.now() + 30.0))
        await until(lambda: sent == ["hung@a"])
        busy = asyncio.create_task(outcome(both, "busy", 3, clock.now() + 30.0))
        await until(lambda: sent == ["hung@a", "busy@b"])
        urgent = await outcome(both, "urgent", 1, clock.now() + 1.0)
        await asyncio.gather(hung, busy)
        return urgent

    urgent = run_virtual(main())
    assert urgent == "reranked", (urgent, sent)


def test_the_rest_of_a_recall_cut_at_max_pairs_is_not_sent_to_a_slow_replica_that_cannot_answer_it_in_time() -> None:
    """Ten recalls of 30 with 1 s each: the fast replica (1 ms a pair) answers all 300 pairs within 0.3 s. The
    shares are computed once: fast's is cut at ``max_pairs`` (64: two recalls and 4 pairs of the third); slow's share
    is a few pairs, but ``take`` handed it its first job whole, the 26 pairs left of the third recall: 1.3 s at 50 ms
    a pair, past that recall's deadline. It stays queued for fast instead. Later, with fast full, slow took the rest
    of the ninth and all of the tenth as one request (44 pairs, 2.2 s): now it takes what it answers in time."""
    fast_sent: list[str] = []
    slow_sent: list[str] = []
    fast, slow = paced("http://fast", 0.001, 4, fast_sent), paced("http://slow", 0.05, 4, slow_sent)

    async def main() -> list[str]:
        for n in range(6):
            assert await outcome(batcher_of(slow), f"s{n}", 2, clock.now() + 30.0) == "reranked"
        for n in range(6):
            assert await outcome(batcher_of(fast), f"f{n}", 2, clock.now() + 30.0) == "reranked"
        both = MicroBatcher(Dispatch(ReplicaSet([slow, fast], budget=RetryBudget()), StatsRecorder(),
                                     DispatchPolicy()), mixes_queries=True, max_pairs=64, window=0.01,
                            max_queued_pairs=10_000)
        deadline = clock.now() + 1.0
        return list(await asyncio.gather(*(outcome(both, f"r{n}", 30, deadline) for n in range(10))))

    outcomes = run_virtual(main())
    assert outcomes == ["reranked"] * 10, (str(outcomes), "slow got", slow_sent[6:], "fast got", fast_sent[6:])


def full_pair() -> tuple[ReplicaSet, list[Replica], list[Lease]]:
    """Two replicas of one slot each, both taken by earlier requests (whose leases are returned)."""
    members = [Replica(url, EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy())), unused_send)
               for url in ("http://a", "http://b")]
    held = [member.state.limiter.take(f"an earlier request to {member.url}") for member in members]
    return ReplicaSet(members, budget=RetryBudget()), members, held


async def unused_send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
    raise AssertionError("only slots are asked for")


def waiting_on_both(members: list[Replica]) -> bool:
    return all(member.state.limiter._waiters for member in members)


def test_a_wait_for_the_first_free_slot_cancelled_takes_nothing_from_either_replica() -> None:
    async def main() -> None:
        replicas, members, held = full_pair()
        acquiring = asyncio.create_task(replicas.acquire("a request"))
        await until(lambda: waiting_on_both(members))
        acquiring.cancel()
        held[0].release()  # a's slot is granted to the wait in the same instant it is cancelled
        await asyncio.gather(acquiring, return_exceptions=True)
        assert acquiring.cancelled()
        assert [m.state.limiter.in_flight for m in members] == [0, 1]  # a's came back; b's is still the earlier one's
        assert not any(m.state.limiter._waiters for m in members)

    run_virtual(main())


def test_two_slots_freed_at_once_the_wait_keeps_one_and_gives_the_other_back() -> None:
    async def main() -> None:
        replicas, members, held = full_pair()
        acquiring = asyncio.create_task(replicas.acquire("a request"))
        await until(lambda: waiting_on_both(members))
        for lease in held:
            lease.release()
        replica, lease = await acquiring
        assert lease.held and lease.holder == "a request" and replica.state.limiter.in_flight == 1
        other = members[1] if replica is members[0] else members[0]
        await until(lambda: other.state.limiter.in_flight == 0)
        assert not any(m.state.limiter._waiters for m in members)

    run_virtual(main())


async def measured(fast: Replica, slow: Replica) -> None:
    """Each replica past its warm-up, by recalls of settings that reach it alone (2 pairs each)."""
    for n in range(6):
        assert await outcome(batcher_of(slow), f"s{n}", 2, clock.now() + 30.0) == "reranked"
    for n in range(6):
        assert await outcome(batcher_of(fast), f"f{n}", 2, clock.now() + 30.0) == "reranked"


async def timed(call: Awaitable[str]) -> tuple[str, float]:
    """The outcome and how long after the call it came."""
    start = clock.now()
    result = await call
    return result, round(clock.now() - start, 3)


def test_a_full_replica_whose_slot_frees_after_the_deadline_does_not_hold_up_the_dispatcher() -> None:
    """fast answers a pair in 10 ms, slow in 50 ms; one slot each. fast's slot is held by a batch of 100 pairs (1 s).
    "urgent" (10 pairs, 0.3 s) comes: judged by the latency of its recent answers (0.1 s), fast looks in time, but
    its slot stays taken for a second. Waiting for it while slow sat idle, "urgent" timed out at its deadline
    instead of being shed at once, and "later" (4 pairs, 0.5 s), which slow answers in 0.2 s, timed out behind it.
    A full replica is judged behind what it has in flight."""
    fast_sent: list[str] = []
    slow_sent: list[str] = []
    fast, slow = paced("http://fast", 0.01, 1, fast_sent), paced("http://slow", 0.05, 1, slow_sent)

    async def main() -> tuple[tuple[str, float], tuple[str, float]]:
        await measured(fast, slow)
        big = asyncio.create_task(outcome(batcher_of(fast), "big", 100, clock.now() + 30.0))
        await until(lambda: fast_sent[-1:] == ["big:100"] and fast.state.limiter.in_flight == 1)
        both = batcher_of(fast, slow)
        now = clock.now()
        urgent = asyncio.create_task(timed(outcome(both, "urgent", 10, now + 0.3)))
        later = asyncio.create_task(timed(outcome(both, "later", 4, now + 0.5)))
        results = await urgent, await later
        assert await big == "reranked"
        return results

    (urgent, urgent_after), (later, later_after) = run_virtual(main())
    assert later == "reranked", (later, later_after, "slow got", slow_sent[6:], "fast got", fast_sent[6:])
    assert urgent in ("overload", "reranked") and urgent_after < 0.1, (urgent, urgent_after)


def test_a_recall_kept_for_a_full_replica_is_not_sent_along_to_a_slow_one_that_answers_it_too_late() -> None:
    """fast answers a pair in 10 ms, slow in 50 ms; one slot each; fast's slot is held for 20 ms. "small" (1 pair)
    and "large" (10 pairs) come together, both due in 0.3 s. slow has the free slot and answers "small" in 0.05 s;
    only fast answers "large" in time (0.1 s once its slot frees). Kept for fast, "large" went in slow's request
    with "small": 11 pairs, 0.55 s, and both timed out. A request to a slower replica now takes no more than it
    answers by the most urgent recall's deadline; the rest waits for fast."""
    fast_sent: list[str] = []
    slow_sent: list[str] = []
    fast, slow = paced("http://fast", 0.01, 1, fast_sent), paced("http://slow", 0.05, 1, slow_sent)

    async def main() -> list[str]:
        await measured(fast, slow)
        held = asyncio.create_task(outcome(batcher_of(fast), "held", 2, clock.now() + 30.0))
        await until(lambda: fast_sent[-1:] == ["held:2"] and fast.state.limiter.in_flight == 1)
        both = batcher_of(fast, slow, mixes_queries=True)
        deadline = clock.now() + 0.3
        outcomes = list(await asyncio.gather(outcome(both, "small", 1, deadline),
                                             outcome(both, "large", 10, deadline)))
        assert await held == "reranked"
        return outcomes

    small, large = run_virtual(main())
    assert small == "reranked", (small, large, "slow got", slow_sent[6:], "fast got", fast_sent[6:])
    assert large in ("reranked", "overload"), (small, large, "slow got", slow_sent[6:], "fast got", fast_sent[6:])
