"""Agents with different ``rerank_timeout`` at one server are served earliest deadline first (docs/overload.md).

A 5 s agent's recalls queue at a server that holds a request at its gate; a 1 s agent's recall then needs
only what is due before it (nothing queued) and what is in flight, so it is admitted and answered in time,
not shed behind seconds of work that had slack. The 5 s agent's recalls it passes are still reranked: a recall
due sooner that would push one of them past its deadline is itself shed at once. Sequenced by the
server's gate and the engine's counters, not by time.
"""

from __future__ import annotations

import asyncio

import pytest

from support.counters import accounted, stats_until
from support.encoding import encoding_scorer, recall
from support.overload import held_burst, learn_pace
from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.statistics import RerankerStatistics
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio


def _settled(queued_pairs: int, overload: int) -> object:
    """The counters once a new recall is either queued (its 4 pairs) or shed."""
    return lambda s: s.queued_pairs == queued_pairs + 4 or s.fallbacks.get("overload", 0) > overload


async def _short_recall(config: RerankerConfig, q: int, before: RerankerStatistics
                        ) -> tuple[asyncio.Task[object], RerankerStatistics]:
    call = asyncio.create_task(runtime.rerank_async(*recall(q, 4), config=config))
    return call, await stats_until(_settled(before.queued_pairs, before.fallbacks.get("overload", 0)))


@pytest.mark.parametrize("own_batcher", [False, True], ids=["same-batcher", "own-batcher"])
async def test_a_short_timeout_recall_is_served_before_a_long_timeout_queue_with_slack(own_batcher: bool) -> None:
    """12 recalls of the 5 s agent queue (3 s of work); the 1 s agent's recall behind them on main waited for
    all of it and was shed. Served first, it fits: it is reranked, and so is every one of the 5 s agent's."""
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        long_agent = RerankerConfig(endpoint=server.url, api="rerank", timeout=5.0, max_concurrency=1)
        short_agent = long_agent.replace(timeout=1.0, batch_window_ms=5.0 if own_batcher else long_agent.batch_window_ms)
        await learn_pace(long_agent, server, 0.25)  # one request at a time, 0.25 s each
        calls, stats = await held_burst(long_agent, server, 12)
        assert "overload" not in stats.fallbacks, stats  # 3 s of work fits in 5 s
        short, stats = await _short_recall(short_agent, 90, stats)
        assert "overload" not in stats.fallbacks, stats  # admitted: only the held request is ahead of it
        server.gate.release()
        assert await short is not None  # reranked within its 1 s
        assert all(r is not None for r in await asyncio.gather(*calls))  # and so is every 5 s recall
        stats = await stats_until(accounted)
        assert stats.fallback_total == 0 and stats.breakers[server.url] == "closed", stats
    finally:
        await server.close()


async def test_a_recall_due_sooner_never_costs_an_admitted_recall_its_answer() -> None:
    """The 5 s agent's queue is full to its deadline; recalls of a 1.5 s agent arrive. Each is served first only
    if every recall queued with the longer timeout still fits before its own deadline; else it gets its stock
    result at once, while the server still holds its request. Either way every recall admitted before is
    reranked: none is shed after it was admitted, and nobody times out."""
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        long_agent = RerankerConfig(endpoint=server.url, api="rerank", timeout=5.0, max_concurrency=1)
        short_agent = long_agent.replace(timeout=1.5)
        await learn_pace(long_agent, server, 0.25)
        calls, stats = await held_burst(long_agent, server, 40)  # more than fit in 5 s: some shed already
        shed_long = stats.fallbacks["overload"]
        assert shed_long >= 5, stats
        shorts = []
        for q in range(90, 96):
            short, stats = await _short_recall(short_agent, q, stats)
            shorts.append(short)
        shed_short = stats.fallbacks["overload"] - shed_long
        assert stats.queued_pairs == (40 - shed_long - 1 + 6 - shed_short) * 4, stats  # nothing else left the queue
        assert sum(short.done() for short in shorts) == shed_short  # the shed ones came back at once
        if shed_short:
            assert "longer timeout" in stats.last_error or "would wait about" in stats.last_error, stats
        server.gate.release()
        results = await asyncio.gather(*calls)
        assert sum(r is not None for r in results) == 40 - shed_long  # every admitted 5 s recall reranked
        assert sum(r is not None for r in await asyncio.gather(*shorts)) == 6 - shed_short
        stats = await stats_until(accounted)
        assert "timeout" not in stats.fallbacks and stats.breakers[server.url] == "closed", stats
    finally:
        await server.close()
