"""A burst after a quiet spell (issue: overload): a server left idle is no slower or faster for it, so the
recalls a burst brings that it cannot answer in time are shed at once, not admitted on an estimate that
faded while nothing was asked of it and then dropped near their deadline.

The batcher, dispatch step and endpoint state are the real ones; the server is one GPU serving one pass at
a time (30 ms plus 0.5 ms a pair), on an event loop whose clock jumps to its next timer
(``support.virtual_time``), so the minute of quiet passes at once and every figure is exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import Overloaded, RerankError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder

PASS_S, PAIR_S, DOCUMENTS, TIMEOUT_S = 0.03, 0.0005, 20, 2.0


class OneGpu:
    """A replica's send: one forward pass at a time, on the engine's clock."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()

    async def send(self, batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        async with self.lock:
            await asyncio.sleep(PASS_S + PAIR_S * len(batch))
        return [1.0 - i / 1000 for i in range(len(batch))]


async def recall(engine: MicroBatcher, index: int) -> tuple[str, float]:
    """What came of one recall, and how long its caller waited for it."""
    started = clock.now()
    documents = [f"memory {j} of recall {index}" for j in range(DOCUMENTS)]
    try:
        await engine.score(f"query {index}", documents, started + TIMEOUT_S)
        outcome = "reranked"
    except RerankError as exc:
        outcome = "overload" if isinstance(exc, Overloaded) else exc.reason
    return outcome, clock.now() - started


def test_a_burst_after_a_quiet_minute_sheds_what_the_server_cannot_answer_at_once() -> None:
    replica = Replica("gpu", EndpointState(EndpointLimiter(4), CircuitBreaker()), OneGpu().send)
    engine = MicroBatcher(Dispatch(ReplicaSet([replica], budget=RetryBudget()), StatsRecorder()),
                          mixes_queries=False, max_pairs=64, window=0.01, max_queued_pairs=100_000)

    async def main() -> list[tuple[str, float]]:
        for index in range(5):  # the server's pace is learnt: 40 ms a recall
            assert (await recall(engine, index))[0] == "reranked"
        await asyncio.sleep(60.0)  # nothing is asked of it for a minute
        return await asyncio.gather(*(recall(engine, 100 + index) for index in range(200)))

    results = run_virtual(main())
    reranked = [waited for outcome, waited in results if outcome == "reranked"]
    shed = [waited for outcome, waited in results if outcome != "reranked"]
    assert len(reranked) >= 0.9 * TIMEOUT_S / (PASS_S + PAIR_S * DOCUMENTS)  # the server's 2 s are used
    assert {outcome for outcome, _ in results} <= {"reranked", "overload"}
    assert max(shed) == 0.0, sorted(shed)[-5:]  # every other recall had its stock result at once
