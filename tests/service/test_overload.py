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
