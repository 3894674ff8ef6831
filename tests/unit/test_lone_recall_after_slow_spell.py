"""A recall alone (nothing queued, nothing in flight) is always sent, whatever the estimate
(docs/overload.md): it is how an estimate made during a slow spell is renewed. Admission let it in
(``expected_wait`` is None), but the dispatcher's ``_shed_hopeless`` then shed it on that same stale
estimate, and an idle server's estimate never fades: every later recall was shed, for ever."""

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


class Server:
    def __init__(self) -> None:
        self.seconds = 1.5  # a slow spell (a cold start, another tenant's load)
        self.sent = 0

    async def send(self, batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        self.sent += 1
        await asyncio.sleep(self.seconds)
        return [1.0] * len(batch)


def test_a_lone_recall_is_sent_whatever_the_estimate_so_a_slow_spell_is_forgotten() -> None:
    server = Server()
    state = EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy()))
    engine = MicroBatcher(Dispatch(ReplicaSet([Replica("gpu", state, server.send)], budget=RetryBudget()),
                                   StatsRecorder(), DispatchPolicy()),
                          mixes_queries=True, max_pairs=64, window=0.01, max_queued_pairs=1000)

    async def main() -> list[str]:
        await engine.score("cold", ["a", "b"], clock.now() + 10.0)  # answered in 1.5 s: the estimate
        server.seconds = 0.01  # the server is fast again
        outcomes = []
        for n in range(20):  # one recall at a time with a 1 s timeout, a minute apart
            await asyncio.sleep(60.0)
            try:
                await engine.score(f"q{n}", ["a", "b"], clock.now() + 1.0)
                outcomes.append("reranked")
            except RerankError as exc:
                outcomes.append(exc.reason)
        return outcomes

    outcomes = run_virtual(main())
    assert outcomes.count("reranked") >= 15, (outcomes, f"requests sent after the slow one: {server.sent - 1}")
