"""One clock (issue 22, acceptance 4): breaker cooldown, retry backoff, Retry-After, the hedge delay, the
retry budget and the deadlines all read the engine's clock, so one virtual clock drives them together.

The batcher, dispatch step, breakers and budget are the real ones, on an event loop whose time jumps
to its next timer instead of waiting (``support.virtual_time``): no test here sleeps for real, and
each asserts the virtual instant at which a request went out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import BreakerOpen, RateLimited, ServerError, TransportError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder

HOUR = 3600.0


class ScriptedServer:
    """A replica's send: each request meets the next step of the script: an error, a number of seconds
    on the engine's clock before it answers, or None (it answers at once; so does every request once
    the script is done). Replicas given one list share one script. Records when each request went out."""

    def __init__(self, name: str, steps: list[BaseException | float | None] | None = None) -> None:
        self.name = name
        self.steps = [] if steps is None else steps
        self.sent_at: list[float] = []

    async def send(self, batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        self.sent_at.append(clock.now())
        step = self.steps.pop(0) if self.steps else None
        if isinstance(step, float):
            await asyncio.sleep(step)  # a server that takes this long (on the virtual clock)
        elif step is not None:
            raise step
        return [1.0 - i / 100 for i in range(len(batch))]


def batcher(*servers: ScriptedServer, policy: DispatchPolicy, cooldown: float = 15.0) -> MicroBatcher:
    replicas = [Replica(s.name, EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy(cooldown=cooldown))),
                        s.send) for s in servers]
    dispatch = Dispatch(ReplicaSet(replicas, budget=RetryBudget()), StatsRecorder(), policy)
    return MicroBatcher(dispatch, mixes_queries=True, max_pairs=64, window=0.0, max_queued_pairs=1000)


def recall(engine: MicroBatcher, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    return engine.score("which backup ran last", ["the nightly backup", "a recipe"], clock.now() + timeout)


def test_retry_backoff_and_a_retry_after_are_waited_out_on_the_engine_clock() -> None:
    """A 503, then a 429 asking for 30 s, then an answer: the second attempt follows the first by the
    backoff (equal jitter: between half of 50 ms and 50 ms), the third the second by the 30 s asked."""
    server = ScriptedServer("only", [ServerError(503, "busy"), RateLimited(429, "slow down", retry_after=30.0)])
    engine = batcher(server, policy=DispatchPolicy(max_retries=2))

    async def main() -> tuple[list[tuple[int, float]] | None, int]:
        scored = await recall(engine)
        return scored.ranking, scored.retries

    assert run_virtual(main()) == ([(0, 1.0), (1, 0.99)], 2)
    first, second, third = server.sent_at
    assert 0.025 <= second - first <= 0.05
    assert third - second == pytest.approx(30.0, abs=1e-6)


def test_an_open_breaker_admits_its_probe_exactly_when_its_cooldown_ends() -> None:
    """Three refused connections open the breaker for an hour: a recall just before the hour is refused
    without a request, the two at the hour are its probes, answered, and the breaker closes."""
    server = ScriptedServer("only", [TransportError("connection refused")] * 3)
    engine = batcher(server, policy=DispatchPolicy(max_retries=0), cooldown=HOUR)
    state = engine.dispatch.replicas.replicas[0].state

    async def main() -> list[str]:
        seen = []
        for _ in range(3):
            with pytest.raises(TransportError):
                await recall(engine)
        opened = clock.now()
        seen.append(state.breaker.state)
        await asyncio.sleep(HOUR - 0.001)
        with pytest.raises(BreakerOpen):
            await recall(engine)
        seen.append(state.breaker.state)
        await asyncio.sleep(opened + HOUR - clock.now())
        for _ in range(2):
            assert (await recall(engine)).ranking == [(0, 1.0), (1, 0.99)]
            seen.append(state.breaker.state)
        assert server.sent_at[-1] - opened == pytest.approx(HOUR, abs=1e-6)
        return seen

    assert run_virtual(main()) == ["open", "open", "half_open", "closed"]
    assert len(server.sent_at) == 5  # three failures and the two probes: nothing while open


def test_a_hedge_goes_out_exactly_at_its_delay_and_its_answer_wins() -> None:
    """The first attempt hangs for an hour; the duplicate goes to the other replica 0.3 s later and
    answers; the recall is back at that instant, not at the hour."""
    script: list[BaseException | float | None] = [HOUR]  # whichever replica the first attempt goes to hangs
    slow, fast = ScriptedServer("a", script), ScriptedServer("b", script)
    engine = batcher(slow, fast, policy=DispatchPolicy(max_retries=0, hedge=True, hedge_delay_s=0.3))

    async def main() -> float:
        started = clock.now()
        assert (await recall(engine, timeout=10.0)).ranking == [(0, 1.0), (1, 0.99)]
        return clock.now() - started

    took = run_virtual(main())
    first, hedge = sorted([*slow.sent_at, *fast.sent_at])
    assert [len(slow.sent_at), len(fast.sent_at)] == [1, 1]  # one attempt each: the first, and its hedge
    assert hedge - first == pytest.approx(0.3, abs=1e-6)
    assert took == pytest.approx(0.3, abs=1e-6)
