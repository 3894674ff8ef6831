"""Hedging the slow tail (issue: resilience, hedging): a request still unanswered after the hedge delay
is sent once more; the first answer wins, the loser is cancelled, the cap still holds, and hedges come
out of the retry budget. Sequenced by the server's own counters; the detecting recall sends no hedge, so none
is counted, spends the budget or arrives late."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from support.encoding import encoding_scorer, recall
from support.outages import OVERLOADED
from support.servers import Hang, RecordedRequest, Respond, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio


async def detected(**settings: Any) -> tuple[RunningServer, RerankerConfig]:
    server = await start_server("vllm", scorer=encoding_scorer)
    config = RerankerConfig(endpoint=server.url, api="rerank", hedge="on", **{"timeout": 5.0, **settings})
    # Hedging off here: on a busy machine this answer came after the hedge delay, and its hedge was counted
    # and spent one of the two retries the budget's reserve gives the test. The route is shared all the same.
    assert await runtime.rerank_async(*recall(0, 4), config=config.replace(hedge="off")) is not None
    server.reset()
    return server, config


def nth_posts(faults: dict[int, Any]) -> Any:
    """``faults[n]`` for the n-th POST from now (1-based), normal answers otherwise."""
    seen = [0]

    def rule(request: RecordedRequest) -> Any:
        if request.method != "POST":
            return None
        seen[0] += 1
        return faults.get(seen[0])

    return rule


async def test_a_stalled_request_is_hedged_and_the_first_answer_wins() -> None:
    server, config = await detected(hedge_delay_ms=50)
    try:
        server.set_fault(nth_posts({1: Hang()}))
        ranking = await runtime.rerank_async(*recall(1, 4), config=config)
        assert ranking is not None and [i for i, _ in ranking] == [3, 2, 1, 0]
        await server.wait_until(lambda s: s.in_flight == 0)  # the stalled loser was cancelled
        assert server.count("/rerank") == 2
        stats = runtime.statistics()
        assert stats.hedges == 1 and stats.fallback_total == 0 and stats.in_flight == 0
    finally:
        await server.close()


async def test_a_hedge_that_fails_is_followed_by_another() -> None:
    server, config = await detected(hedge_delay_ms=50)
    try:
        server.set_fault(nth_posts({1: Hang(), 2: OVERLOADED}))
        assert await runtime.rerank_async(*recall(1, 4), config=config) is not None
        assert server.count("/rerank") == 3 and runtime.statistics().hedges == 2
    finally:
        await server.close()


async def test_an_answer_before_the_delay_sends_no_hedge() -> None:
    server, config = await detected(hedge_delay_ms=2000)
    try:
        for q in range(1, 6):
            assert await runtime.rerank_async(*recall(q, 4), config=config) is not None
        assert server.count("/rerank") == 5 and runtime.statistics().hedges == 0
    finally:
        await server.close()


async def test_hedges_never_exceed_the_concurrency_cap() -> None:
    """The hedge waits for a free slot (ahead of new batches); its win frees the stalled one's."""
    server, config = await detected(hedge_delay_ms=50, max_concurrency=2)
    try:
        server.set_fault(nth_posts({1: Hang()}))
        results = await asyncio.gather(*(runtime.rerank_async(*recall(q, 4), config=config) for q in range(1, 9)))
        assert all(r is not None for r in results)
        assert server.max_in_flight <= 2 and runtime.statistics().hedges >= 1
    finally:
        await server.close()


def first_post_of(query: str, fault: Any) -> Any:
    """``fault`` for the first POST carrying ``query`` from now: a hedge sent earlier and arriving late does not
    take it."""
    seen = [False]

    def rule(request: RecordedRequest) -> Any:
        if request.method != "POST" or query not in request.text or seen[0]:
            return None
        seen[0] = True
        return fault

    return rule


async def test_the_automatic_delay_waits_for_enough_answers_to_know_the_tail() -> None:
    server, config = await detected()  # hedge_delay_ms 0: the endpoint's p95, once 20 answers are known
    try:
        server.set_fault(nth_posts({1: Hang()}))
        assert await runtime.rerank_async(*recall(1, 4), config=config.replace(timeout=0.5)) is None
        assert runtime.statistics().hedges == 0  # too few answers yet: no delay to go by
        server.set_fault(None)
        for q in range(2, 30):
            assert await runtime.rerank_async(*recall(q, 4), config=config) is not None
        hedged_before = runtime.statistics().hedges  # an answer slower than the p95 so far may be hedged too:
        # its loser may reach the server after this, so the stall is for this recall's own request only
        server.set_fault(first_post_of(recall(40, 4)[0], Hang()))
        assert await runtime.rerank_async(*recall(40, 4), config=config) is not None
        assert runtime.statistics().hedges == hedged_before + 1
    finally:
        await server.close()


async def test_a_hedge_never_goes_to_a_server_inside_its_retry_after() -> None:
    """Secrets and edges, round three, finding 6: one server, hedging on. While the first request is out,
    the server answers another with a 429 and a Retry-After of 30 s. The hedge that the first request's
    delay would send has nowhere to go: no request reaches the server before the time it asked for."""
    server, config = await detected(hedge_delay_ms=300, max_retries=0)
    try:
        first_query = recall(1, 4)[0]
        server.gate.hold(lambda r: r.method == "POST" and first_query in r.text)
        limited = Respond(429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "30"})
        server.set_fault(lambda r: limited if r.method == "POST" and first_query not in r.text else None)
        first = asyncio.create_task(runtime.rerank_result_async(*recall(1, 4), config=config))
        await server.gate.wait_held(1)
        refused = await runtime.rerank_result_async(*recall(2, 4), config=config)
        assert refused.reason == "rate_limited" and server.count() == 2
        with pytest.raises(TimeoutError):  # the first request's hedge delay passes, and more than that
            await server.wait_until(lambda s: s.count() > 2, within_s=1.0)
        server.gate.release()
        assert (await first).ranking is not None
        assert server.count() == 2 and runtime.statistics().hedges == 0
    finally:
        await server.close()
