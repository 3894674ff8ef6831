"""What the plugin adds to a recall fits in ``rerank_timeout``, its pool search included (issue 21,
finding 10): a pool search that stalls gives A0's answer at the deadline under its own reason, the
pool search and the rerank share that one deadline, and the log line gives the whole time the plugin
added. A pool search that fails says why in ``last_error``. On both memory APIs of the stand-in."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import anyio
import pytest

from support.counters import accounted, stats_until
from support.deadlines import EARLY_S, Stopwatch, assert_released_at_deadline, sanity_bound
from support.servers import Delay, RunningServer
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, MEM_FILTER, memory_text
from .test_recall import MEMORIES, recall, stock_memories

pytestmark = pytest.mark.anyio

POOL_K = 20  # the pool search's limit (rerank_candidates); A0's own searches ask for 12, 8 or 3


def widened(store: Any, run: Any) -> None:
    """Route the store's searches for the pool (``k`` 20) through ``run(search)``; A0's own pass as they are."""
    original = store.asearch

    async def searching(query: str, search_type: str, **kwargs: Any) -> Any:
        search = original(query, search_type, **kwargs)
        return await (run(search) if kwargs.get("k") == POOL_K else search)

    store.asearch = searching


async def stalled(search: Any) -> Any:
    search.close()
    await asyncio.Event().wait()


def added_ms(line: str) -> int:
    """The milliseconds a recall log line reports."""
    return int(re.findall(r"(\d+) ms", line)[-1])


async def test_a_stalled_pool_search_gives_a0s_answer_at_rerank_timeout(a0: A0, server: RunningServer) -> None:
    timeout = 0.5
    a0.configure(endpoint=server.url, timeout=timeout)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    watch = Stopwatch()
    await recall(a0, agent)  # a good recall first: the API is detected, and what A0's own work costs is known
    good_recall_s = watch.elapsed
    memory = await a0.Memory.get(agent)
    widened(memory.db, stalled)
    runtime.stats_recorder().reset()
    watch = Stopwatch()
    with anyio.fail_after(sanity_bound(timeout) + good_recall_s):
        loop_data, calls = await recall(a0, agent, "alpha beta again")
    assert_released_at_deadline(watch.elapsed, timeout, more=good_recall_s)
    assert loop_data.extras_persistent["memories"] == await stock_memories(a0, agent, calls[0]["query"])
    stats = runtime.statistics()
    assert stats.fallbacks == {"pool_search_timeout": 1} and stats.reranks == 0
    assert "pool search" in stats.last_error and "rerank_timeout" in stats.last_error
    line = a0.recall_lines(agent)[-1]
    assert line.startswith("Reranker fell back to the stock order (pool_search_timeout")
    assert (timeout - EARLY_S) * 1000 <= added_ms(line) < sanity_bound(timeout) * 1000

    a0.ours("a0_hooks.recall_scope").begin(agent, "recall")  # object for object, what A0's own call returned
    found = await memory.search_similarity_threshold(query="alpha beta", limit=12, threshold=0.7, filter=MEM_FILTER)
    stock = await a0.original_search(agent, query="alpha beta", limit=12, threshold=0.7, filter=MEM_FILTER)
    assert len(found) == 12 and all(a is b for a, b in zip(found, stock, strict=True))
    assert runtime.statistics().fallbacks == {"pool_search_timeout": 2}


async def test_the_pool_search_and_the_rerank_share_one_rerank_timeout(a0: A0, server: RunningServer) -> None:
    """Each alone takes 0.6 of the timeout: together they are past it, so the recall keeps A0's answer,
    and its log line gives the whole time added, not the rerank's share."""
    timeout = 1.0
    a0.configure(endpoint=server.url, timeout=timeout)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    await recall(a0, agent)  # detection done and cached
    memory = await a0.Memory.get(agent)

    async def slow(search: Any) -> Any:  # a slow store or embedding API: latency, not synchronisation
        await asyncio.sleep(0.6 * timeout)
        return await search

    widened(memory.db, slow)
    server.set_fault(lambda request: Delay(0.6 * timeout) if request.method == "POST" else None)
    runtime.stats_recorder().reset()
    loop_data, calls = await recall(a0, agent, "alpha beta again")
    assert loop_data.extras_persistent["memories"] == await stock_memories(a0, agent, calls[0]["query"])
    assert (await stats_until(accounted)).fallbacks == {"timeout": 1}
    line = a0.recall_lines(agent)[-1]
    assert line.startswith("Reranker fell back to the stock order (timeout)")
    assert added_ms(line) >= (timeout - EARLY_S) * 1000


async def test_a_failed_pool_search_says_why_in_last_error(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    memory = await a0.Memory.get(agent)
    scope = a0.ours("a0_hooks.recall_scope")
    await server.close()  # first an unrelated failure: the reranker is gone
    scope.begin(agent, "recall")
    await memory.search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)
    older = runtime.statistics().last_error
    assert runtime.statistics().fallbacks.get("connect") == 1 and older

    async def broken(search: Any) -> Any:
        search.close()
        raise RuntimeError("the store broke on the second search")

    widened(memory.db, broken)
    found = await memory.search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)
    assert [d.page_content for d in found] == [memory_text(k) for k in range(3)]
    stats = runtime.statistics()
    assert stats.fallbacks["pool_search"] == 1
    assert stats.last_error != older and "pool search" in stats.last_error and "RuntimeError" in stats.last_error
    assert "alpha" not in stats.last_error
