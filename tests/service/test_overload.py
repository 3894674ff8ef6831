"""Overload through the public API against real loopback servers (issue: overload, acceptance 1, 4, 5).

A healthy server asked for more than it can serve: recalls it cannot answer before their deadline get
their stock result at once, while it still holds the others (sequenced by the server's gate, not by
time); a timeout counts against the server only when its request was sent with a fair chance; and
nothing of it opens the breaker. The figures under open-loop load are ``bench/overload_bench.py``'s.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from support.counters import accounted, stats_until
from support.encoding import encoding_scorer, recall
from support.overload import held_burst, learn_pace, posts
from support.servers import Hang, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio


async def test_recalls_the_server_cannot_answer_in_time_come_back_at_once_while_it_holds_the_rest() -> None:
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=5.0, max_concurrency=1)
        await learn_pace(config, server, 0.25)  # one request at a time, 0.25 s each: about 20 fit in 5 s
        sent = server.count()
        calls, stats = await held_burst(config, server, 40)
        shed = stats.fallbacks["overload"]
        finished = await _finished(calls, shed)
        assert 5 <= shed <= 35, stats  # the rest fit in 5 s at the server's pace
        assert all(task.result() is None for task in finished)  # the stock order, while the server held one
        assert server.count() == sent + 1  # and none of them reached the server
        server.gate.release()
        results = await asyncio.gather(*calls)
        assert sum(r is not None for r in results) == 40 - shed  # every recall admitted was reranked
        stats = await stats_until(accounted)
        assert stats.breakers[server.url] == "closed" and stats.shed == shed and "timeout" not in stats.fallbacks
        assert stats.load.shed_per_s > 0 and stats.load.queue_wait_p95_ms is not None
        assert "would wait about" in stats.last_error
    finally:
        await server.close()


async def _finished(calls: list[asyncio.Task[Any]], count: int) -> list[asyncio.Task[Any]]:
    """The ``count`` calls that have returned (their results travel back through this loop)."""
    pending = set(calls)
    while len(calls) - len(pending) < count:
        _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    return [task for task in calls if task.done()]


@pytest.mark.parametrize(("seconds", "held_against_it"), [(0.45, False), (3.0, True)])
async def test_a_timeout_counts_against_the_server_only_after_a_fair_chance(seconds: float,
                                                                             held_against_it: bool) -> None:
    """The server answers in 0.3 s, then stops answering. A request sent with 0.45 s left had less than
    twice what it needs: its timeout says nothing about the server, and a breaker that opens on one
    failure stays closed. One sent with 3 s had every chance: the same breaker opens."""
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=seconds, max_retries=0,
                                breaker_failures=1, breaker_failure_rate=1)
        await learn_pace(config, server, 0.3)
        server.set_fault(lambda r: Hang() if posts(r) else None)
        sent = server.count()
        assert await runtime.rerank_async(*recall(9, 4), config=config) is None
        stats = await stats_until(accounted)
        assert stats.fallbacks == {"timeout": 1} and server.count() == sent + 1  # sent, then timed out
        assert stats.breakers[server.url] == ("open" if held_against_it else "closed")
    finally:
        await server.close()


async def test_an_agent_with_settings_of_its_own_is_shed_behind_another_agents_queue_at_the_same_server() -> None:
    """Two agents whose settings differ (here the batch window) queue in batchers of their own, for the slots
    of one server. Agent B's recalls already fill ``rerank_timeout`` of that server's work while it holds a
    request: agent A's recalls behind them cannot be answered in time either, and must get their stock result
    at once, not be admitted for only their own (empty) queue and then wait out most of their timeout."""
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        agent_b = RerankerConfig(endpoint=server.url, api="rerank", timeout=5.0, max_concurrency=1)
        agent_a = agent_b.replace(batch_window_ms=5.0)
        await learn_pace(agent_b, server, 0.25)  # one request at a time, 0.25 s each: about 20 fit in 5 s
        calls, stats = await held_burst(agent_b, server, 40)  # more than fit: B's queue reaches its horizon
        shed_b = stats.fallbacks["overload"]
        assert shed_b >= 5, stats
        calls += [asyncio.create_task(runtime.rerank_async(*recall(60 + q, 4), config=agent_a)) for q in range(10)]
        stats = await stats_until(lambda s: s.fallbacks.get("overload", 0) + s.queued_pairs // 4 + 1 == 50)
        # (an estimate fades while the server holds its request: a slow machine may admit one or two)
        assert stats.fallbacks["overload"] - shed_b >= 5, stats
        server.gate.release()
        await asyncio.gather(*calls)
        stats = await stats_until(accounted)
        assert stats.breakers[server.url] == "closed" and "timeout" not in stats.fallbacks
    finally:
        await server.close()
