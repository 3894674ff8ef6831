"""A hedge that waits for a slot its own request holds. One replica with one slot, hedging on: after the
hedge delay the hedge asks for the replica's slot, which the request itself holds. If the first attempt then fails
with a retryable error (a 503), ``race`` goes on waiting for the hedge, and the hedge for the slot its own request
will give back only when it ends: nothing moves until the callers' deadline, although a retry after the backoff
would have been answered at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import ServerError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


def test_a_failed_first_attempt_is_retried_although_its_hedge_waits_for_the_same_slot() -> None:
    sent: list[float] = []

    async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(clock.now())
        if len(sent) == 1:
            await asyncio.sleep(0.2)  # past the hedge delay (50 ms), then a 503
            raise ServerError(503, "busy")
        return [1.0] * len(batch)

    async def main() -> None:
        state = EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy(cooldown=60)))
        stats = StatsRecorder()
        replicas = ReplicaSet([Replica("http://server", state, send)], budget=RetryBudget())
        policy = DispatchPolicy(max_retries=2, hedge=True, hedge_delay_s=0.05, hedges=1)
        batcher = MicroBatcher(Dispatch(replicas, stats, policy), mixes_queries=True, max_pairs=100, window=0.01,
                               max_queued_pairs=1000)
        started = clock.now()
        result = await batcher.score("q", ["d1", "d2"], started + 10.0)  # DeadlineExceeded at 10 s: one attempt only
        assert result.ranking is not None
        assert clock.now() - started < 2.0, f"answered only after {clock.now() - started:.2f} s"

    run_virtual(main())


def test_two_requests_whose_hedges_wait_for_each_others_slot_are_retried() -> None:
    """Two replicas with one slot each, a request on each: each one's hedge waits for the slot the other holds."""
    sent: list[str] = []

    def send_of(url: str) -> Callable[[ScoreBatch, float, Callable[[], bool]], Awaitable[list[float]]]:
        async def send(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
            sent.append(url)
            if sent.count(url) == 1:
                await asyncio.sleep(0.2)  # past the hedge delay, then a 503
                raise ServerError(503, "busy")
            return [1.0] * len(batch)
        return send

    async def main() -> None:
        replicas = ReplicaSet([Replica(url, EndpointState(EndpointLimiter(1), CircuitBreaker(BreakerPolicy())),
                                       send_of(url)) for url in ("http://a", "http://b")], budget=RetryBudget())
        policy = DispatchPolicy(max_retries=2, hedge=True, hedge_delay_s=0.05, hedges=1)
        batcher = MicroBatcher(Dispatch(replicas, StatsRecorder(), policy), mixes_queries=False, max_pairs=2,
                               window=0.01, max_queued_pairs=1000)
        started = clock.now()
        results = await asyncio.gather(batcher.score("q1", ["d1", "d2"], started + 10.0),
                                       batcher.score("q2", ["d3", "d4"], started + 10.0))
        assert all(result.ranking is not None for result in results)
        assert clock.now() - started < 2.0, f"answered only after {clock.now() - started:.2f} s"
        assert sorted(sent[:2]) == ["http://a", "http://b"], sent  # one request went to each replica

    run_virtual(main())
