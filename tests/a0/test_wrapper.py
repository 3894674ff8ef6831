"""The wrapper on ``Memory.search_similarity_threshold``: idempotent, call shapes kept, the store's own
documents untouched, store errors unchanged, and still live after A0 purges our modules."""

from __future__ import annotations

import asyncio
import copy
import functools
from typing import Any

import pytest

from support.servers import RunningServer
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, memory_text

pytestmark = pytest.mark.anyio

METHOD = "search_similarity_threshold"


def contents(docs: list[Any]) -> list[str]:
    return [d.page_content for d in docs]


async def test_install_is_idempotent_and_keeps_the_original(a0: A0) -> None:
    original = a0.Memory.__dict__[METHOD]
    patch, entry = a0.ours("a0_hooks.memory_patch"), a0.ours("a0_hooks.recall_entry")
    assert entry.ensure_installed() and entry.ensure_installed()
    wrapper = a0.Memory.__dict__[METHOD]
    assert wrapper is not original and wrapper.__wrapped__ is original
    assert entry.is_current(wrapper) and wrapper.__name__ == METHOD
    a0.new_agent()  # agent_init re-checks: nothing changes
    assert a0.Memory.__dict__[METHOD] is wrapper
    # this root's class, and the classes of earlier tests' roots still alive with our wrapper on top
    wrapped = sum(patch.is_ours(getattr(cls, METHOD, None)) for cls in patch._PATCHED.get())
    assert wrapped >= 1 and patch.uninstall() == wrapped and a0.Memory.__dict__[METHOD] is original
    assert not patch._PATCHED.get() and patch.uninstall() == 0  # nothing of ours is left anywhere


async def test_recall_returns_the_stores_own_documents_unmutated(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    memory = await a0.Memory.get(agent)
    stored = memory.db.get_all_docs()
    before = {i: copy.deepcopy(d.metadata) for i, d in stored.items()}
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    found = await memory.search_similarity_threshold(query="alpha beta", limit=4, threshold=0.7)
    assert contents(found) == [memory_text(k) for k in (15, 14, 13, 12)]
    assert all(d is stored[d.metadata["id"]] for d in found)
    assert {i: d.metadata for i, d in stored.items()} == before


async def test_positional_calls_keep_their_shape(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    memory = await a0.Memory.get(agent)
    calls = await a0.store_calls(agent)
    stock = await memory.search_similarity_threshold("alpha beta", 3, 0.7, "")  # outside the scope
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    reranked = await memory.search_similarity_threshold("alpha beta", 3, 0.7, "")
    assert contents(stock) == [memory_text(k) for k in range(3)]
    assert contents(reranked) == [memory_text(k) for k in (15, 14, 13)]
    assert [c["k"] for c in calls] == [3, 3, 20]  # stock; then in scope A0's own call and the pool


async def test_unknown_keywords_pass_through_to_a_newer_signature(a0: A0, server: RunningServer) -> None:
    seen: list[dict[str, Any]] = []
    v17 = a0.Memory.__dict__[METHOD]

    async def newer(self: Any, query: str, limit: int, threshold: float, filter: str = "",
                    embedding: list[float] | None = None) -> Any:
        seen.append({"limit": limit, "embedding": embedding})
        return await v17(self, query, limit, threshold, filter)

    setattr(a0.Memory, METHOD, newer)
    agent = a0.new_agent()  # agent_init wraps the newer method
    assert a0.Memory.__dict__[METHOD].__wrapped__ is newer
    await a0.seed(agent, 16)
    memory = await a0.Memory.get(agent)
    a0.ours("a0_hooks.recall_entry").begin(agent, "memory_load")
    found = await memory.search_similarity_threshold(query="alpha beta", limit=2, threshold=0.7, embedding=[0.5])
    assert seen == [{"limit": 2, "embedding": [0.5]}, {"limit": 20, "embedding": [0.5]}]
    assert contents(found) == [memory_text(15), memory_text(14)]


@pytest.mark.parametrize("in_scope", [False, True])
async def test_store_exceptions_propagate_unchanged(a0: A0, server: RunningServer, in_scope: bool) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, 4)
    memory = await a0.Memory.get(agent)
    failure = RuntimeError("store broke")

    async def broken(query: str, search_type: str, **kwargs: Any) -> Any:
        raise failure

    memory.db.asearch = broken
    if in_scope:
        a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    with pytest.raises(RuntimeError) as caught:
        await memory.search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)
    assert caught.value is failure
    assert server.count() == 0


async def test_odd_arguments_run_stock(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    memory = await a0.Memory.get(agent)
    a0.ours("a0_hooks.recall_entry").begin(agent, "memory_load")
    calls = await a0.store_calls(agent)
    found = await memory.search_similarity_threshold(query="alpha beta", limit=True, threshold=0.7)
    assert [c["k"] for c in calls] == [True]  # an LLM-invented limit goes to the store as given
    assert contents(found) == [memory_text(0)]
    assert server.count() == 0


async def test_a_wrapper_from_before_a_purge_still_reranks(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    stale = a0.Memory.__dict__[METHOD]
    purged = a0.plugins.purge_plugin_modules()
    assert "usr.plugins.a0_reranker.a0_hooks.recall_entry" in purged
    fresh = a0.ours("a0_hooks.recall_entry")
    assert a0.ours("a0_hooks.memory_patch").is_ours(stale) and not fresh.is_current(stale)
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")  # the scope written by the NEW module copy
    memory = await a0.Memory.get(agent)
    found = await memory.search_similarity_threshold(query="alpha beta", limit=2, threshold=0.7)
    assert a0.Memory.__dict__[METHOD] is stale  # nothing re-wrapped yet: the old wrapper did the work
    assert contents(found) == [memory_text(15), memory_text(14)]
    assert fresh.ensure_installed()
    renewed = a0.Memory.__dict__[METHOD]
    assert fresh.is_current(renewed) and renewed.__wrapped__ is stale.__wrapped__


async def test_a_foreign_wrapper_on_top_is_left_alone_and_nothing_reranks_twice(
    a0: A0, server: RunningServer
) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    ours = a0.Memory.__dict__[METHOD]

    @functools.wraps(ours)
    async def foreign(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await ours(self, *args, **kwargs)

    setattr(a0.Memory, METHOD, foreign)
    a0.plugins.purge_plugin_modules()
    entry = a0.ours("a0_hooks.recall_entry")
    assert entry.ensure_installed() and a0.Memory.__dict__[METHOD] is foreign
    assert a0.ours("a0_hooks.memory_patch").is_installed()
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    memory = await a0.Memory.get(agent)
    found = await memory.search_similarity_threshold(query="alpha beta", limit=2, threshold=0.7)
    assert contents(found) == [memory_text(15), memory_text(14)]
    assert runtime.statistics().reranks == 1
    setattr(a0.Memory, METHOD, entry.make_wrapper(foreign))  # ours -> foreign -> ours: the inner one sees no scope
    found = await memory.search_similarity_threshold(query="alpha beta", limit=2, threshold=0.7)
    assert contents(found) == [memory_text(15), memory_text(14)]
    assert runtime.statistics().reranks == 2


async def test_a_bug_or_overrun_below_the_wrapper_returns_stock(
    a0: A0, server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    a0.configure(endpoint=server.url, timeout=0.1)
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    memory = await a0.Memory.get(agent)
    recall_search = a0.ours("a0_hooks.recall_search")

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug of ours")

    async def stuck(*args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    monkeypatch.setattr(recall_search, "rerank_pool", broken)
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    found = await memory.search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)
    assert contents(found) == [memory_text(k) for k in range(3)]
    assert "fell back to the stock order (error)" in a0.recall_lines(agent)[-1]
    assert runtime.statistics().fallbacks["error"] == 1
    monkeypatch.undo()
    # An owner loop that never answers: the caller's one backstop (deadline + grace) gives stock.
    monkeypatch.setattr(runtime.runtime().service, "rerank", stuck)
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    found = await memory.search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)
    assert contents(found) == [memory_text(k) for k in range(3)]
    assert "fell back to the stock order (timeout)" in a0.recall_lines(agent)[-1]
    assert runtime.statistics().fallbacks.get("timeout", 0) == 1  # the caller counts the timeout it returned
