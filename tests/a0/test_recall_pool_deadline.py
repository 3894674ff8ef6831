"""What the plugin adds to a recall fits in ``rerank_timeout``, its pool search included (issue 21,
finding 10): the pool search reuses the query embedding of A0's own call, a pool search that stalls
gives A0's answer at the deadline under its own reason, the pool search and the rerank share that one
deadline, and the log line gives the whole time the plugin added. A pool search that fails says why
in ``last_error``. On both memory APIs of the stand-in."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from support.counters import accounted, stats_until
from support.deadlines import EARLY_S, PATIENT_S, Stopwatch, assert_released_at_deadline, sanity_bound
from support.servers import Delay, RunningServer
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, MEM_FILTER, memories_prompt, memory_text
from .test_recall import MEMORIES, recall, stock_memories

pytestmark = pytest.mark.anyio

POOL_K = 20  # the pool search's limit (rerank_candidates); A0's own searches ask for 12, 8 or 3


def count_embeddings(store: Any, *, answered: int | None = None) -> list[str]:
    """Record every query the store's embedding model embeds from now on; with ``answered``, the calls
    after that many never answer (a remote embedding API that stalls)."""
    model = store.embedding_function
    embed = type(model).aembed_query.__get__(model)  # the model's own method, not an earlier recorder
    texts: list[str] = []

    async def embedding(text: str) -> list[float]:
        texts.append(text)
        if answered is not None and len(texts) > answered:
            await asyncio.Event().wait()
        return await embed(text)

    model.aembed_query = embedding
    return texts


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


def texts(*ks: int) -> list[Any]:
    return [SimpleNamespace(page_content=memory_text(k)) for k in ks]


async def test_a_reranked_recall_embeds_its_query_no_more_often_than_stock_a0(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    embedded = count_embeddings((await a0.Memory.get(agent)).db)
    loop_data, calls = await recall(a0, agent)
    assert [c["k"] for c in calls] == [12, POOL_K, 8]  # memories: A0's call, the pool; solutions: A0's call
    assert len(embedded) == 2  # one embedding per search of A0's, as in stock A0; none for the pool
    assert loop_data.extras_persistent["memories"] == memories_prompt(agent, texts(15, 14, 13, 12, 11))


async def test_an_embedding_api_stalling_on_a_second_call_does_not_hold_the_recall(
    a0: A0, server: RunningServer
) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    store = (await a0.Memory.get(agent)).db
    for purged in (False, True):  # a tap installed before A0 purges our modules keeps serving after it
        if purged:
            a0.plugins.purge_plugin_modules()
        embedded = count_embeddings(store, answered=1)
        with anyio.fail_after(PATIENT_S):
            response = await agent.call_tool("memory_load", {"query": "alpha beta", "limit": 3})
        found = [line.removeprefix("Content: ") for line in response.message.splitlines() if line.startswith("Content")]
        assert found == [memory_text(15), memory_text(14), memory_text(13)]  # reranked over the whole pool
        assert embedded == ["alpha beta"]
    assert runtime.statistics().reranked == 2


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

    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")  # object for object, what A0's own call returned
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
    scope = a0.ours("a0_hooks.recall_entry")
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


async def test_an_embedding_error_in_a0s_own_call_propagates_unchanged(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    model = (await a0.Memory.get(agent)).db.embedding_function
    failure = RuntimeError("the embedding API is down")

    async def failing(text: str) -> list[float]:
        raise failure

    model.aembed_query = failing
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    with pytest.raises(RuntimeError) as caught:
        await (await a0.Memory.get(agent)).search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)
    assert caught.value is failure and server.count("/rerank") == 0


async def test_uninstall_leaves_the_store_as_a0_made_it(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    await recall(a0, agent)
    store = (await a0.Memory.get(agent)).db
    a0.ours("a0_hooks.lifecycle").uninstall()
    assert "_aembed_query" not in vars(store)
    embedded = count_embeddings(store)
    found = await a0.original_search(agent, query="alpha beta", limit=3, threshold=0.7)
    assert len(found) == 3 and embedded == ["alpha beta"]
