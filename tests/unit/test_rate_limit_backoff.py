"""429s without a Retry-After in a row hold the replica back longer each time, up to a cap; an answer to a
request sent after them ends the streak; a recall whose deadline ends inside the hold falls back at once.

The batcher, dispatch step, retries and endpoint state are the real ones, on a loop whose clock jumps to its
next timer (``support.virtual_time``): each hold is read off the virtual instants at which requests went out.
A 429 is answered at the instant it is sent, so the next request going out marks the end of the hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from support.one_replica import new_state, one_replica_batcher
from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.dispatch import DispatchPolicy
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState
from usr.plugins.a0_reranker.batching.retries import RATE_LIMIT_CAP_S, rate_limit_hold
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import RateLimited
from usr.plugins.a0_reranker.service.route_checks import Detection, recheck

LIMITED = "429"  # a script step: a 429 without Retry-After (Cohere's, Jina's and Voyage's way)


class Server:
    """One replica's send, following a script of 429s and answers (answers once the script is done)."""

    def __init__(self, steps: list[str], together: int = 1) -> None:
        self.steps = steps
        self.sent_at: list[float] = []
        self.together = together  # the first this many requests are answered once all of them are in flight
        self.all_in = asyncio.Event()

    async def send(self, batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        self.sent_at.append(clock.now())
        if len(self.sent_at) >= self.together:
            self.all_in.set()
        await self.all_in.wait()
        if self.steps and self.steps.pop(0) == LIMITED:
            raise RateLimited(429, "rate limit exceeded")
        return [1.0 - i / 100 for i in range(len(batch))]

    def gaps(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.sent_at, self.sent_at[1:], strict=False)]


def engine(server: Server, state: EndpointState | None = None) -> MicroBatcher:
    return one_replica_batcher(server.send, state=state, policy=DispatchPolicy(max_retries=0))[0]


async def recall(batcher: MicroBatcher, within_s: float = 600.0) -> bool:
    """True when reranked, False when rate-limited (the stock recall)."""
    try:
        await batcher.score("which backup ran last", ["the nightly backup", "a recipe"], clock.now() + within_s)
    except RateLimited:
        return False
    return True


def recalls(server: Server, count: int) -> list[bool]:
    batcher = engine(server)

    async def main() -> list[bool]:
        return [await recall(batcher) for _ in range(count)]

    return run_virtual(main())


def test_a_second_429_in_a_row_holds_the_replica_back_longer_than_the_first() -> None:
    server = Server([LIMITED, LIMITED])
    assert recalls(server, 3) == [False, False, True]
    first, second = server.gaps()  # each the whole hold: the next recall waited it out, then went out
    assert 0.5 <= first <= 1.0  # about a second (equal jitter: half of it fixed), not a 50 ms backoff step
    assert 1.0 <= second <= 2.0 and second > first


def test_an_answer_ends_the_streak() -> None:
    server = Server([LIMITED, LIMITED, LIMITED, "answer", LIMITED])
    assert recalls(server, 6) == [False, False, False, True, False, True]
    gaps = server.gaps()
    assert 2.0 <= gaps[2] <= 4.0  # the third in a row
    assert gaps[3] == 0.0  # the answer: no hold after it
    assert 0.5 <= gaps[4] <= 1.0  # a 429 after an answer holds as the first of a streak again


def test_an_answer_to_detection_sent_after_the_last_429_ends_the_streak() -> None:
    """A route check (detection beside the recalls) answered: the key is back under its limit, as when a recall
    is answered. One whose requests were in flight before the last 429 says nothing of it: the streak stands."""
    server, state = Server([LIMITED] * 4), new_state()
    batcher, in_flight, answer = engine(server, state), asyncio.Event(), asyncio.Event()

    async def detect(transport: object, config: RerankerConfig, deadline: float) -> object:  # the server's answer
        in_flight.set()
        await answer.wait()
        return "route"

    def check() -> Awaitable[object]:
        return recheck(detect, None, Detection((), RerankerConfig(), clock.now() + 600.0), state,  # type: ignore[arg-type]
                       lambda: None)

    async def main() -> list[bool]:
        outcomes = [await recall(batcher)]  # the first 429
        answer.set()
        assert await check() == "route"  # waits out its hold, then answered
        outcomes.append(await recall(batcher))  # a 429 after the answer: the first of a streak again
        answer.clear()
        in_flight.clear()
        checking = asyncio.ensure_future(check())
        await in_flight.wait()  # the check's requests went out ...
        outcomes.append(await recall(batcher))  # ... before this 429: the second in a row
        answer.set()
        assert await checking == "route"  # answered, but it was in flight before the last 429
        return [*outcomes, await recall(batcher), await recall(batcher)]

    assert run_virtual(main()) == [False, False, False, False, True]
    gaps = server.gaps()
    assert 0.5 <= gaps[1] <= 1.0  # the 429 after the answered check held as a first one
    assert 2.0 <= gaps[3] <= 4.0  # the check in flight before the second did not end the streak: the third


def test_a_recall_whose_deadline_ends_inside_the_hold_falls_back_at_once_with_nothing_sent() -> None:
    server = Server([LIMITED, LIMITED])
    batcher = engine(server)

    async def main() -> tuple[bool, float, int]:
        await recall(batcher)
        await recall(batcher)  # waits out the first hold: the second 429 holds for at least a second
        sent, started = len(server.sent_at), clock.now()
        reranked = await recall(batcher, within_s=0.9)
        return reranked, clock.now() - started, len(server.sent_at) - sent

    assert run_virtual(main()) == (False, 0.0, 0)


def test_the_hold_is_capped() -> None:
    server = Server([LIMITED] * 12)
    assert recalls(server, 13) == [False] * 12 + [True]
    gaps = server.gaps()
    assert max(gaps) <= 32.0
    assert all(gap >= 16.0 for gap in gaps[-5:])  # at the cap from the sixth in a row on


def test_a_key_refused_for_days_stays_at_the_cap() -> None:
    """A key out of credit answers 429 to every request: past 1,024 in a row (nine hours at the cap) the hold is
    still the cap's, not an ``OverflowError`` that fails every recall as an unexpected error."""
    state = new_state()
    state.rate_limits = 5_000

    async def main() -> float:
        state.hold_off_growing(clock.now(), lambda in_a_row: rate_limit_hold(in_a_row, jitter=0.0))
        return state.not_before - clock.now()

    assert run_virtual(main()) == RATE_LIMIT_CAP_S / 2  # half fixed, half by the jitter


def test_a_burst_answered_with_429s_together_counts_once() -> None:
    """Eight recalls at once, each its own request, all answered 429: one signal, so the next request waits
    one first hold, not the eighth in a row's."""
    server = Server([LIMITED] * 8, together=8)
    batcher = engine(server)

    async def main() -> list[bool]:
        queries = [batcher.score(f"query {q}", ["a", "b"], clock.now() + 600.0) for q in range(8)]
        outcomes = await asyncio.gather(*queries, return_exceptions=True)
        assert [type(o) for o in outcomes] == [RateLimited] * 8
        return [await recall(batcher)]

    assert run_virtual(main()) == [True]
    assert len(server.sent_at) == 9 and len(set(server.sent_at[:8])) == 1  # the eight went out together
    assert 0.5 <= server.sent_at[-1] - server.sent_at[0] <= 1.0


def test_changed_settings_carry_the_streak_over() -> None:
    old, new = (new_state(4) for _ in range(2))

    async def main() -> float:
        for _ in range(2):
            old.hold_off_growing(clock.now(), lambda in_a_row: float(in_a_row))
            await asyncio.sleep(old.not_before - clock.now())
        new.carry_over(old)
        new.hold_off_growing(clock.now(), lambda in_a_row: float(in_a_row))
        return new.not_before - clock.now()

    assert run_virtual(main()) == pytest.approx(3.0)  # the third in a row, across the change
