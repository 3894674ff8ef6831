"""The balancer's view of a replica's failures follows the breaker's verdict on the same attempt: a request
cancelled because its last caller left at the deadline is a timeout, held against the server as the breaker
holds it; one whose caller left early says nothing of it (docs/overload.md, "Fair chance"). The service
tier's ``test_timeout_fairness`` shows the same for a timeout the transport raises. Virtual clock, no sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from support.loop_steps import until
from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import DeadlineExceeded
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


@pytest.mark.parametrize("leaves_at_deadline", [True, False], ids=["at_deadline", "early"])
def test_a_request_cancelled_with_its_callers_counts_against_the_replica_as_its_breaker_says(
        leaves_at_deadline: bool) -> None:
    """A server never answered yet (nothing expected of it: every timeout counts) holds the request until the
    engine cancels it. At the deadline the breaker hears ``down`` and the balancer a failure; a caller that
    left early costs the server neither."""
    sent: list[ScoreBatch] = []

    async def hang(batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        sent.append(batch)
        await asyncio.Event().wait()  # ignores its deadline: only a cancellation ends it
        raise AssertionError("unreachable")

    async def main() -> None:
        state = EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=60)))
        dispatch = Dispatch(ReplicaSet([Replica("http://server", state, hang)], budget=RetryBudget()),
                            StatsRecorder(), DispatchPolicy(max_retries=0))
        batcher = MicroBatcher(dispatch, mixes_queries=True, max_pairs=100, window=0.01, max_queued_pairs=1000)
        call = asyncio.create_task(batcher.score("q", ["d1", "d2"], clock.now() + 1.0))
        await until(lambda: bool(sent))
        if leaves_at_deadline:
            with pytest.raises(DeadlineExceeded):
                await call
        else:
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
        await until(lambda: batcher.idle and state.outstanding_requests == 0)
        assert state.breaker.state == ("open" if leaves_at_deadline else "closed")
        assert (state.recent_failures() > 0) is leaves_at_deadline, state.failure_score

    run_virtual(main())
