"""A server that was slow, then hangs (long-run lens): a timeout sent with less than twice the server's
observed latency says nothing of it (docs/failure-behaviour.md), but what was observed must not outlive
the silence that follows. Requests that go unanswered hour after hour are a server that is down, and the
breaker must open rather than let every recall pay the whole timeout for ever.

Real batcher, dispatch step, breaker and budget on a loop whose time jumps to its next timer
(``support.virtual_time``): no test here sleeps for real.
"""

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
from usr.plugins.a0_reranker.core.errors import RerankError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder

DAY = 86400.0
SLOW_S = 4.0  # what the server took while it still answered
TIMEOUT_S = 6.0  # less than twice that: a first timeout is no fair chance


class SlowThenHung:
    """Answers its first ``answers`` requests after ``SLOW_S``, then never again; counts what it was sent."""

    def __init__(self, answers: int) -> None:
        self.answers = answers
        self.sent = 0

    async def send(self, batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        self.sent += 1
        await asyncio.sleep(SLOW_S if self.sent <= self.answers else DAY)
        return [1.0 - i / 100 for i in range(len(batch))]


def test_a_slow_server_that_hangs_is_ejected_not_waited_on_for_ever() -> None:
    server = SlowThenHung(answers=6)
    state = EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy(cooldown=DAY)))
    dispatch = Dispatch(ReplicaSet([Replica("only", state, server.send)], budget=RetryBudget()), StatsRecorder(),
                        DispatchPolicy(max_retries=0))
    engine = MicroBatcher(dispatch, mixes_queries=True, max_pairs=64, window=0.0, max_queued_pairs=1000)

    async def main() -> list[str]:
        outcomes = []
        for n in range(server.answers + 20):  # one recall at a time, each to its deadline
            try:
                await engine.score(f"query {n}", ["a", "b"], clock.now() + TIMEOUT_S)
                outcomes.append("answered")
            except RerankError as exc:
                outcomes.append(exc.reason)
        return outcomes

    outcomes = run_virtual(main())
    assert outcomes[:server.answers] == ["answered"] * server.answers
    assert state.breaker.state == "open", outcomes
    assert server.sent <= server.answers + 5, outcomes  # a few timeouts, then refused without a request
