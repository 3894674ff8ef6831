"""Recall through the stand-in's own flows (issue 4, acceptance 2): the reranked order reaches the prompt,
failures give exactly stock within ``rerank_timeout``, a disabled plugin makes no HTTP call, shadow
mode returns stock and records the order change."""

from __future__ import annotations

from typing import Any

import pytest

from support.counters import accounted, stats_until
from support.deadlines import Stopwatch, assert_released_at_deadline, assert_released_within
from support.servers import Delay, Hang, Respond, RunningServer, start_server
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, MEM_FILTER, PROFILE, memories_prompt, memory_text

pytestmark = pytest.mark.anyio

MEMORIES = 16  # recall asks for 12 (pool 20 covers all 16), then keeps 5


async def recall(a0: A0, agent: Any, message: str = "alpha beta") -> tuple[Any, list[dict[str, Any]]]:
    """One message-loop pass (recall runs on iteration 0); returns the loop data and the store's calls."""
    calls = await a0.store_calls(agent)
    agent.hist_add_user_message(message)
    loop_data = await agent.run_message_loop()
    return loop_data, calls


async def stock_memories(a0: A0, agent: Any, query: str) -> str:
    """What stock A0 puts in the prompt for this query: the original method with recall's own arguments."""
    docs = await a0.original_search(agent, query=query, limit=12, threshold=0.7, filter=MEM_FILTER)
    return memories_prompt(agent, docs)


async def test_reranked_order_reaches_the_recall_prompt(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, timeout=10)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    loop_data, calls = await recall(a0, agent)
    asked = [c["k"] for c in calls]
    query = calls[0]["query"]
    stock = await a0.original_search(agent, query=query, limit=12, threshold=0.7, filter=MEM_FILTER)
    assert [d.page_content for d in stock[:5]] == [memory_text(k) for k in range(5)]  # stock: embedding order
    expected = [memory_text(k) for k in range(15, 10, -1)]  # the reranker's best five
    assert loop_data.extras_persistent["memories"] == memories_prompt(agent, [_Doc(t) for t in expected])
    assert asked == [12, 20, 8]  # memories: A0's own call, then the pool; solutions: nothing found, no pool
    assert server.count("/rerank") >= 1


async def test_one_log_line_per_reranked_recall_without_document_text(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, timeout=10)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    await recall(a0, agent)
    lines = a0.recall_lines(agent)
    assert len(lines) == 1  # memories were reranked; the empty solutions search had nothing to rerank
    line = lines[0]
    assert line.startswith("Reranked recall: 16 candidates -> 12 returned in ")
    assert "via rerank" in line and "kept 8/12 of the stock top" in line and "mean shift" in line
    assert "alpha" not in line and "prio" not in line


async def test_memory_load_is_reranked_and_decides_membership(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, timeout=10)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    calls = await a0.store_calls(agent)
    response = await agent.call_tool("memory_load", {"query": "alpha beta", "limit": 3})
    contents = [line.removeprefix("Content: ") for line in response.message.splitlines() if line.startswith("Content")]
    assert contents == [memory_text(15), memory_text(14), memory_text(13)]
    assert [c["k"] for c in calls] == [3, 20]  # A0's own call, then the pool
    assert a0.recall_lines(agent)[0].startswith("Reranked memory_load: 16 candidates -> 3 returned")


FAULTS = {
    "http_500": Respond(500, {"error": "boom"}),
    "not_json": Respond(200, "<html>oops</html>", content_type="application/json"),
    "hang": Hang(),
    "slow": Delay(5.0),
}
REASONS = {"http_500": "http_status", "not_json": "malformed", "hang": "timeout", "slow": "timeout"}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_failing_or_slow_server_gives_exactly_stock_within_the_timeout(
    a0: A0, server: RunningServer, fault: str
) -> None:
    """The proof is the prompt (exactly stock), the counters (the reason) and, for the faults that hold the
    answer back, that the server got our request and never answered it in time. The time is a sanity bound
    (``support.deadlines``): the recall costs at most the timeout, plus a second, plus what the same
    recall cost with a working server just before (A0's own work around the rerank, on this machine now);
    a held-back answer is never released before the deadline."""
    timeout = 1.0
    # a good recall first, which detects and caches the API at leisure (on a busy machine that can outlast 1 s)
    a0.configure(endpoint=server.url, timeout=10)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    await recall(a0, agent)
    assert a0.recall_lines(agent)[-1].startswith("Reranked recall:")  # the premise: the route is known
    a0.configure(endpoint=server.url, timeout=timeout)
    watch = Stopwatch()
    await recall(a0, agent)  # and what a good recall costs on this machine now
    good_recall_s = watch.elapsed
    server.set_fault(lambda request: FAULTS[fault] if request.method == "POST" else None)
    runtime.stats_recorder().reset()
    sent = server.count()
    watch = Stopwatch()
    loop_data, calls = await recall(a0, agent, "alpha beta again")
    elapsed = watch.elapsed
    assert loop_data.extras_persistent["memories"] == await stock_memories(a0, agent, calls[0]["query"])
    assert "fell back to the stock order" in a0.recall_lines(agent)[-1]
    assert any(r.method == "POST" for r in server.requests[sent:]), "the fault must have met our request"
    assert (await stats_until(accounted)).fallbacks == {REASONS[fault]: 1}
    released = assert_released_at_deadline if REASONS[fault] == "timeout" else assert_released_within
    released(elapsed, timeout, more=good_recall_s)


async def test_dead_endpoint_gives_exactly_stock(a0: A0) -> None:
    dead = await start_server("infinity")
    url = dead.url
    await dead.close()
    a0.configure(endpoint=url, timeout=2)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    loop_data, calls = await recall(a0, agent)
    assert loop_data.extras_persistent["memories"] == await stock_memories(a0, agent, calls[0]["query"])
    assert runtime.statistics().fallback_total >= 1


@pytest.mark.parametrize("how", ["toggle_profile", "toggle_global", "rerank_enabled_false", "no_endpoint"])
async def test_disabled_or_unconfigured_plugin_makes_no_http_call(a0: A0, server: RunningServer, how: str) -> None:
    a0.configure(endpoint="" if how == "no_endpoint" else server.url, enabled=how != "rerank_enabled_false")
    if how == "toggle_profile":
        a0.plugins.toggle_plugin("a0_reranker", False, agent_profile=PROFILE)
        assert (a0.root / "usr/agents" / PROFILE / "plugins/a0_reranker/.toggle-0").is_file()
    if how == "toggle_global":
        a0.plugins.toggle_plugin("a0_reranker", False)
        assert (a0.plugin_dir / ".toggle-0").is_file()
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    loop_data, calls = await recall(a0, agent)
    await agent.call_tool("memory_load", {"query": "alpha beta"})
    assert server.count() == 0
    assert [c["k"] for c in calls] == [12, 8, 10]  # A0's own limits, not widened (checked before our own search)
    assert loop_data.extras_persistent["memories"] == await stock_memories(a0, agent, calls[0]["query"])
    assert a0.recall_lines(agent) == []
    assert runtime.statistics().fallback_total == 0  # plain A0, counted as nothing (README: the status's mode says it)


async def test_invalid_settings_run_stock_and_name_the_bad_keys(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, timeout="soon", candidates=0)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    loop_data, calls = await recall(a0, agent)
    assert loop_data.extras_persistent["memories"] == await stock_memories(a0, agent, calls[0]["query"])
    assert server.count() == 0
    assert a0.recall_lines(agent)[0] == (  # both bad keys, the one that does not coerce and the one out of range
        "Reranker skipped, recall runs stock: invalid settings (rerank_candidates, rerank_timeout)")
    assert runtime.statistics().fallbacks["config"] == 2  # the memories and the solutions search


async def test_shadow_mode_returns_stock_and_records_the_order_change(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, apply=False, timeout=10)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    loop_data, calls = await recall(a0, agent)
    assert loop_data.extras_persistent["memories"] == await stock_memories(a0, agent, calls[0]["query"])
    assert server.count("/rerank") >= 1
    stats = runtime.statistics()
    assert stats.shadow_recalls == 1
    assert stats.shadow_mean_kept_fraction == pytest.approx(8 / 12)
    assert stats.shadow_mean_displacement is not None and stats.shadow_mean_displacement > 0
    [line] = a0.recall_lines(agent)
    assert line.startswith("Reranker shadow mode, recall: 16 candidates scored")
    assert "would have kept 8/12 of the stock top" in line and "stock order returned (12)" in line


async def test_store_errors_propagate_unchanged_through_recall(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, timeout=10)
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    (await a0.Memory.get(agent)).db.docstore._dict.clear()  # FAISS docstore desync (A0 issues #615, #1595)
    agent.hist_add_user_message("alpha beta")
    with pytest.raises(ValueError, match="Could not find document for id"):
        await agent.run_message_loop()
    assert server.count("/rerank") == 0


async def test_settings_follow_the_project_scope(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, timeout=10)
    a0.plugins.save_plugin_config("a0_reranker", "proj", PROFILE, {"rerank_endpoint": server.url,
                                                                    "rerank_enabled": False})
    in_project = a0.new_agent(project="proj")
    await a0.seed(in_project, MEMORIES)
    await recall(a0, in_project)
    assert server.count() == 0
    plain = a0.new_agent()
    await a0.seed(plain, MEMORIES)
    await recall(a0, plain)
    assert server.count("/rerank") >= 1


class _Doc:
    """Only what ``memories_prompt`` reads."""

    def __init__(self, text: str) -> None:
        self.page_content = text
