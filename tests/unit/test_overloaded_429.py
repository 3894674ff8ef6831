"""A self-hosted server's 429 for its own permits being full (TEI's ``Overloaded``, Infinity's "is currently
overloaded") clears as soon as any request ends: the endpoint is held back only until our next answer from it,
or a short growing hold (0.1 s, doubling to 1.6 s) when none of ours is there. A hosted API's quota 429 keeps the
long hold (a second, doubling to 32 s), whatever answers come meanwhile.

The batcher, dispatch step, limiter, retries and endpoint state are the real ones, on a loop whose clock jumps
to its next timer (``support.virtual_time``). The server is a model of TEI's permits (each text holds one for
its request's service time; a request a text of which finds none free is refused at once), and its refusals
are TEI's and Cohere's wire answers read by the real dialect code (``server_error``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from support.one_replica import new_state, one_replica_batcher, replicas_batcher
from support.virtual_time import run_virtual
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import DispatchPolicy
from usr.plugins.a0_reranker.batching.endpoint_state import Replica
from usr.plugins.a0_reranker.batching.retries import hold_after_429
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.dialects.server_errors import server_error
from usr.plugins.a0_reranker.core.dialects.wire import WireAnswer
from usr.plugins.a0_reranker.core.errors import RateLimited, RerankError

SERVICE_S = 0.03  # one request's pass: tens of milliseconds, shorter than the shortest timed hold (0.05 s)
TEI_OVERLOADED = WireAnswer(429, json.dumps({"error": "Model is overloaded", "error_type": "Overloaded"}).encode(),
                            "application/json")
INFINITY_OVERLOADED = WireAnswer(429, json.dumps({"error": {"message": "model bge is currently overloaded",
                                                            "type": None, "param": None, "code": 429}}).encode(),
                                 "application/json")
COHERE_TRIAL = WireAnswer(429, json.dumps({"message": "You are using a Trial key, which is limited to 10 API "
                                                      "calls / minute."}).encode(), "application/json")
PLAIN_429 = WireAnswer(429, b"Too Many Requests", "text/plain")


class PermitServer:
    """TEI's ``--max-concurrent-requests`` permits: each text of a request takes one for ``service_s``; a request
    that finds too few free is refused with ``refusal``, at once when it got none, else once the texts that got one
    have been through their pass, as TEI does. Records when each request went out and ended."""

    def __init__(self, permits: int, refusal: WireAnswer, service_s: float = SERVICE_S) -> None:
        self.free = permits
        self.refusal = refusal
        self.service_s = service_s
        self.log: list[tuple[str, str, float]] = []  # (query, "sent" | "answered" | "refused", virtual time)
        self.in_flight = asyncio.Event()  # set once a request holds permits

    async def send(self, batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        query = batch.queries[0]
        self.log.append((query, "sent", clock.now()))
        got = min(self.free, len(batch))
        self.free -= got
        self.in_flight.set()
        try:
            if got:
                await asyncio.sleep(self.service_s)
        finally:
            self.free += got
        if got < len(batch):
            self.log.append((query, "refused", clock.now()))
            raise server_error(self.refusal)
        self.log.append((query, "answered", clock.now()))
        return [1.0 - i / 100 for i in range(len(batch))]

    def times(self, query: str, what: str) -> list[float]:
        return [at for q, event, at in self.log if q == query and event == what]


def first_recall_holds_the_permits_second_is_refused(refusal: WireAnswer) -> tuple[PermitServer, list[bool]]:
    """Recall "a" takes both permits; "b", sent while "a" is in flight, is refused; both have 10 s."""
    server = PermitServer(permits=2, refusal=refusal)
    batcher, _ = one_replica_batcher(server.send)

    async def recall(query: str) -> bool:
        await batcher.score(query, ["the nightly backup", "a recipe"], clock.now() + 10.0)
        return True

    async def main() -> list[bool]:
        first = asyncio.ensure_future(recall("a"))
        await server.in_flight.wait()  # "a" holds the permits (the loop's own steps: no time passes)
        return list(await asyncio.gather(first, recall("b")))

    return server, run_virtual(main())


def reranked_together(batcher: MicroBatcher, queries: str) -> list[object]:
    """The rankings of one recall of two memories per query, all sent at once with 10 s, on the virtual clock."""

    async def main() -> list[object]:
        deadline = clock.now() + 10.0
        return list(await asyncio.gather(*(batcher.score(q, ["the nightly backup", "a recipe"], deadline)
                                           for q in queries)))

    return run_virtual(main())


@pytest.mark.parametrize("refusal", [TEI_OVERLOADED, INFINITY_OVERLOADED], ids=["tei", "infinity"])
def test_an_overloaded_429_is_retried_the_moment_our_request_in_flight_is_answered(refusal: WireAnswer) -> None:
    server, outcomes = first_recall_holds_the_permits_second_is_refused(refusal)
    assert outcomes == [True, True]  # both reranked
    (refused,), (answered,) = server.times("b", "refused"), server.times("a", "answered")
    assert server.times("b", "sent") == [refused, answered]  # "b" went again at the instant "a" gave its permits back
    assert answered - refused == pytest.approx(SERVICE_S)  # far inside the old hold (0.5 s at the least)


def test_an_overloaded_429_that_comes_after_our_answer_goes_again_at_once() -> None:
    """"a" (two texts) and "b" (two, one permit left for it) go out together; "a" is answered, then "b" is refused,
    its one text through its pass first. The permits came back before that 429 reached us: "b" goes again at
    once, not after a hold (0.05 s at the least), and is answered."""
    server = PermitServer(permits=3, refusal=TEI_OVERLOADED)
    batcher, _ = one_replica_batcher(server.send)
    assert all(reranked_together(batcher, "ab"))
    (start,), (refused,) = server.times("a", "sent"), server.times("b", "refused")
    assert server.times("a", "answered") == [start + SERVICE_S] and refused == start + SERVICE_S
    assert server.times("b", "sent") == [start, refused] and server.times("b", "answered") == [refused + SERVICE_S]


def test_refused_at_the_door_again_and_again_a_recall_spends_no_retry() -> None:
    """Six recalls at once at a server with permits for one request's texts, with no retries allowed: the refused
    go again at each of our answers, one is let in each time, and all six are reranked, served back to back."""
    server = PermitServer(permits=2, refusal=TEI_OVERLOADED)
    batcher, state = one_replica_batcher(server.send, policy=DispatchPolicy(max_retries=0))
    queries = "abcdef"
    assert all(reranked_together(batcher, queries))
    start = min(at for q in queries for at in server.times(q, "sent"))
    answered = sorted(at for q in queries for at in server.times(q, "answered"))
    assert answered == pytest.approx([start + k * SERVICE_S for k in range(1, 7)])
    assert state.breaker.would_admit() and state.limiter.in_flight == 0


def test_with_two_replicas_refused_at_the_door_and_no_retry_budget_every_recall_is_reranked() -> None:
    """Two replicas, each with permits for one request's texts, and a retry budget of none: a refused request spends
    nothing, waiting for its own replica's next answer or going to the other as a request held back does, instead
    of falling back for want of budget. All eight are reranked."""
    servers = [PermitServer(permits=2, refusal=TEI_OVERLOADED) for _ in range(2)]
    states = [new_state(), new_state()]
    batcher = replicas_batcher([Replica(f"r{i}", states[i], servers[i].send) for i in range(2)],
                               budget=RetryBudget(ratio=0.0, reserve=0))
    queries = "abcdefgh"
    assert all(reranked_together(batcher, queries))
    refused, answered = ([at for server in servers for q in queries for at in server.times(q, what)]
                         for what in ("refused", "answered"))
    assert refused and len(answered) == len(queries)  # they did take turns: each answered once
    assert all(state.limiter.in_flight == 0 and state.breaker.would_admit() for state in states)


def test_a_quota_429_keeps_the_long_hold_though_our_request_in_flight_is_answered() -> None:
    server, outcomes = first_recall_holds_the_permits_second_is_refused(COHERE_TRIAL)
    assert outcomes == [True, True]
    (refused,), (answered,) = server.times("b", "refused"), server.times("a", "answered")
    _, retried = server.times("b", "sent")
    assert retried > answered and 0.5 <= retried - refused <= 1.0  # the first quota 429's hold, waited out


@pytest.mark.parametrize("texts", [2, 3], ids=["others-fill-it", "more-texts-than-permits"])
def test_an_overloaded_429_with_none_of_ours_served_there_is_a_retry_after_a_short_growing_hold(texts: int) -> None:
    """Nothing of ours at the server: others' requests fill it (no permit free), or the request has more texts than
    the server has permits (2). Either may last: 0.05 to 0.1 s for the first, twice that for the second in a row,
    and each refusal is a retry, so the recall falls back after the two it is allowed, within half a second, not at
    its deadline."""
    server = PermitServer(permits=0 if texts == 2 else 2, refusal=TEI_OVERLOADED)
    batcher, state = one_replica_batcher(server.send)
    documents = ["the nightly backup", "a recipe", "the on-call rota"][:texts]

    async def main() -> float:
        started = clock.now()
        with pytest.raises(RateLimited):
            await batcher.score("c", documents, started + 10.0)
        return clock.now() - started

    took = run_virtual(main())
    sent, refused = server.times("c", "sent"), server.times("c", "refused")
    assert len(sent) == len(refused) == 3  # the first try and the two retries a request is allowed
    first, second = (again - refusal for refusal, again in zip(refused, sent[1:], strict=False))
    assert 0.05 <= first <= 0.1 and 0.1 <= second <= 0.2 and took < 0.5
    assert state.rate_limits == 3 and state.breaker.would_admit()  # a 429 says nothing of its health


@pytest.mark.parametrize(("refusal", "holds_after"), [(TEI_OVERLOADED, 0.05), (COHERE_TRIAL, 4.0)],
                         ids=["overloaded", "quota"])
def test_any_answer_of_ours_ends_a_streak_of_overloaded_429s(refusal: WireAnswer, holds_after: float) -> None:
    """Three 429s in a row, then an answer to a request sent before them: the overloaded server has room again, so
    its next 429 holds as the first did (0.05 s without jitter), not as the fourth (0.4 s). A quota's streak ends
    only with an answer to a request sent after its last 429: the fourth holds 4 s."""
    state, error = new_state(), server_error(refusal)
    assert isinstance(error, RateLimited)

    async def main() -> float:
        first_sent = clock.now()
        for _ in range(3):
            await asyncio.sleep(1.0)
            hold_after_429(state, error, clock.now(), jitter=0.0)
        state.answered(0.5, 2, first_sent)
        await asyncio.sleep(1.0)
        hold_after_429(state, error, clock.now(), jitter=0.0)
        return state.not_before - clock.now()

    assert run_virtual(main()) == pytest.approx(holds_after)


@pytest.mark.parametrize(("answer", "overloaded"), [
    (TEI_OVERLOADED, True), (INFINITY_OVERLOADED, True), (COHERE_TRIAL, False), (PLAIN_429, False),
    (WireAnswer(429, b'{"error": "Model is overloaded", "error_type": "Overloaded"}', "application/json",
                {"retry-after": "3"}), True),
], ids=["tei", "infinity", "cohere-trial", "plain", "tei-with-retry-after"])
def test_the_dialects_tell_an_overloaded_server_from_a_quota(answer: WireAnswer, overloaded: bool) -> None:
    error = server_error(answer)
    assert error.reason == "rate_limited" and getattr(error, "overloaded", None) is overloaded


def test_an_overloaded_hold_carried_over_to_changed_settings_still_ends_at_our_next_answer() -> None:
    """Changed settings get new state, which keeps what the server said of itself (``carry_over``): the hold, and
    that our next answer ends it."""

    async def main() -> tuple[bool, bool]:
        old, new = new_state(), new_state()
        refusal = server_error(TEI_OVERLOADED)
        assert isinstance(refusal, RateLimited)
        hold_after_429(old, refusal, clock.now(), jitter=0.0)
        new.carry_over(old)
        held = new.rate_limited()
        new.answered(SERVICE_S, 2)
        return held, new.rate_limited()

    assert run_virtual(main()) == (True, False)


@pytest.mark.parametrize("refusal", [TEI_OVERLOADED, COHERE_TRIAL], ids=["overloaded", "quota"])
def test_a_recall_cancelled_while_it_waits_out_a_hold_gives_back_all_it_took(refusal: WireAnswer) -> None:
    """Recall "b" is refused while "a" holds the permits and waits out the hold; its caller is cancelled there. Its
    slot, its queued pairs and the retry a quota 429 spent (an overloaded one spends none) come back, and nothing
    more of it is sent."""
    server = PermitServer(permits=2, refusal=refusal)
    batcher, state = one_replica_batcher(server.send)
    documents = ["the nightly backup", "a recipe"]

    async def main() -> tuple[bool, int]:
        first = asyncio.ensure_future(batcher.score("a", documents, clock.now() + 10.0))
        await server.in_flight.wait()
        second = asyncio.ensure_future(batcher.score("b", documents, clock.now() + 10.0))
        # virtual time: every step that takes none is done first, so "b" has been refused and waits out its hold
        # (at least 0.05 s, or until "a" is answered at SERVICE_S)
        await asyncio.sleep(SERVICE_S / 3)
        assert server.times("b", "refused") and state.rate_limited()
        second.cancel()
        await first
        await asyncio.gather(second, return_exceptions=True)
        budget = batcher.dispatch.replicas.budget  # read on the virtual clock its counts were made on
        return second.cancelled(), sum(budget.try_spend() for _ in range(10))

    cancelled, retries_left = run_virtual(main())
    assert cancelled
    assert retries_left == 2  # two requests sent: the reserve of two retries, any spent for "b" given back
    assert server.times("b", "sent") == server.times("b", "refused")  # sent once: not again after it left
    assert batcher.idle and batcher.queued_pairs == 0
    assert state.limiter.in_flight == 0 and state.outstanding_requests == 0


def test_a_recall_whose_deadline_passes_while_it_takes_turns_gives_back_all_it_took() -> None:
    """"a" holds the permits for a second; "b", with half a second, is refused and goes again at each short hold's
    end while "a" is served, refused each time, until its deadline. It falls back then, and its slot, its queued
    pairs and the server's health are as if it had never come; nothing of it is sent after its deadline."""
    server = PermitServer(permits=2, refusal=TEI_OVERLOADED, service_s=1.0)
    batcher, state = one_replica_batcher(server.send)
    documents = ["the nightly backup", "a recipe"]

    async def main() -> tuple[float, int]:
        first = asyncio.ensure_future(batcher.score("a", documents, clock.now() + 10.0))
        await server.in_flight.wait()
        deadline = clock.now() + 0.5
        with pytest.raises(RerankError):
            await batcher.score("b", documents, deadline)
        await first
        budget = batcher.dispatch.replicas.budget  # read on the virtual clock its counts were made on
        return deadline, sum(budget.try_spend() for _ in range(10))

    deadline, retries_left = run_virtual(main())
    sent = server.times("b", "sent")
    assert len(sent) > 2 and max(sent) < deadline  # it took turns, and went no more once its time was up
    assert retries_left == 2  # refused at the door while "a" was served: no retry spent
    assert batcher.idle and batcher.queued_pairs == 0
    assert state.limiter.in_flight == 0 and state.outstanding_requests == 0 and state.breaker.would_admit()
