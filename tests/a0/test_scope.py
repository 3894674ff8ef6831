"""Outside the recall scope every search is stock (issue 4, acceptance 2): deletion, consolidation, the
memorize background thread and the dashboard get bit-identical results and cause no HTTP call, even
while the plugin is active and reranking recalls."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from support.servers import RunningServer, start_server

from .conftest import A0, memory_text, prio_scorer

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server(a0: A0) -> Any:
    srv = await start_server("infinity", scorer=prio_scorer)
    a0.configure(endpoint=srv.url, timeout=10)
    a0.configure_global(endpoint=srv.url, timeout=10)  # the dashboard has no agent: global scope
    yield srv
    await srv.close()


def snapshot(store: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every stored memory, deep-copied (content and metadata)."""
    return {i: (d.page_content, copy.deepcopy(d.metadata)) for i, d in store.get_all_docs().items()}


async def active_agent(a0: A0, server: RunningServer) -> Any:
    """An agent whose recalls are being reranked (proves the wrapper is live while we test the rest)."""
    agent = a0.new_agent()
    await a0.seed(agent, 12, area="fragments")
    agent.hist_add_user_message("alpha beta")
    await agent.run_message_loop()
    assert a0.recall_lines(agent)[0].startswith("Reranked recall")
    server.reset()
    return agent


async def test_delete_by_query_in_the_background_is_stock(a0: A0, server: RunningServer) -> None:
    agent = await active_agent(a0, server)
    a0.plugins.save_plugin_config("_memory", "", "", {
        **a0.plugins.get_default_plugin_config("_memory"), "memory_memorize_consolidation": False})
    doomed_text = memory_text(3)
    expected = await a0.original_search(agent, query=doomed_text, limit=100, threshold=0.9, filter="area=='fragments'")
    assert expected  # the replace search finds something to delete
    calls = await a0.store_calls(agent)
    agent.context.utility_model = lambda system, message: (
        f'["{doomed_text}"]' if system.startswith("memorize fragments") else "[]")
    await agent.end_monologue()
    await asyncio.to_thread(a0.mod("helpers.defer").wait_for_deferred)
    assert [(c["k"], c["thread"]) for c in calls] == [(100, "Background")]  # positional query, not widened
    remaining = set((await a0.Memory.get(agent)).db.get_all_docs())
    assert not {d.metadata["id"] for d in expected} & remaining
    assert server.count() == 0


async def test_delete_by_query_called_directly_matches_the_original_method(a0: A0, server: RunningServer) -> None:
    agent = await active_agent(a0, server)
    memory = await a0.Memory.get(agent)
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")  # even with a scope left open by mistake...
    a0.ours("a0_hooks.recall_entry").on_monologue_end(agent)  # ...monologue_end closes it before memorize runs
    expected = await a0.original_search(agent, query="alpha beta", limit=100, threshold=0.75, filter="")
    removed = await memory.delete_documents_by_query("alpha beta", 0.75)
    assert [d.metadata["id"] for d in removed] == [d.metadata["id"] for d in expected]
    assert server.count() == 0


async def test_consolidation_sees_exactly_what_stock_sees(a0: A0, server: RunningServer) -> None:
    agent = await active_agent(a0, server)
    agent.context.utility_model = lambda system, message: '["prio05"]' if "keyword" in system else "{}"
    consolidation = a0.mod("plugins._memory.helpers.memory_consolidation")
    store = (await a0.Memory.get(agent)).db
    calls = await a0.store_calls(agent)
    wrapped = await consolidation.create_memory_consolidator(agent)._find_similar_memories(memory_text(2), "fragments")
    with_plugin = snapshot(store)
    patch = a0.ours("a0_hooks.memory_patch")
    assert patch.uninstall() >= 1  # now stock A0: the original method on the class
    stock = await consolidation.create_memory_consolidator(agent)._find_similar_memories(memory_text(2), "fragments")
    assert [d.metadata["id"] for d in wrapped] == [d.metadata["id"] for d in stock]
    assert all(a is b for a, b in zip(wrapped, stock, strict=True))  # the store's own objects
    assert with_plugin == snapshot(store)  # same _consolidation_similarity written by rank
    assert [c["k"] for c in calls] == [10, 10, 10, 10]
    assert server.count() == 0


async def test_memorize_with_consolidation_is_stock(a0: A0, server: RunningServer) -> None:
    agent = await active_agent(a0, server)
    calls = await a0.store_calls(agent)
    agent.context.utility_model = lambda system, message: (
        '["alpha beta learned"]' if system.startswith("memorize") else "[]" if "keyword" in system else "{}")
    await agent.end_monologue()
    await asyncio.to_thread(a0.mod("helpers.defer").wait_for_deferred)
    assert [(c["k"], c["thread"]) for c in calls] == [(8, "Background"), (8, "Background")]
    assert server.count() == 0


async def test_dashboard_search_is_stock(a0: A0, server: RunningServer) -> None:
    agent = await active_agent(a0, server)
    api = a0.mod("helpers.api")
    request = {"action": "search", "search": "alpha beta", "memory_subdir": "default", "limit": 5}
    with_plugin = await asyncio.to_thread(api.dispatch_plugin_api, "_memory", "memory_dashboard", request)
    a0.ours("a0_hooks.memory_patch").uninstall()
    stock = await asyncio.to_thread(api.dispatch_plugin_api, "_memory", "memory_dashboard", request)
    assert with_plugin.status == 200 and with_plugin.body == stock.body
    assert len(with_plugin.json()["memories"]) == 5
    assert server.count() == 0
    assert agent is not None
