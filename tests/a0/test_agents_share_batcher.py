"""Two agents recalling at once share the process's one batcher (issue 4, acceptance 2): their pairs,
for different queries, meet in one vLLM ``/score`` request."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from support.counters import stats_until
from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, memory_text, prio_scorer

pytestmark = pytest.mark.anyio


async def test_two_agents_recalling_at_once_share_one_score_request(a0: A0) -> None:
    server = await start_server("vllm_qwen3", scorer=prio_scorer)
    try:
        a0.configure(endpoint=server.url, timeout=10, max_concurrency=1)
        first, second = a0.new_agent(), a0.new_agent()
        assert first.context is not second.context
        await a0.seed(first, 16)  # both contexts use the same "default" store
        first.hist_add_user_message("alpha beta")
        second.hist_add_user_message("the alpha beta")  # another recall query, same embedding
        config = RerankerConfig(endpoint=server.url, timeout=10, max_concurrency=1)
        assert await runtime.rerank_async("warm up", ["a", "b"], config=config) is not None  # detection cached

        server.gate.hold(lambda request: request.path == "/score")
        blocker = asyncio.create_task(runtime.rerank_async("blocker", ["x", "y"], config=config))
        await server.gate.wait_held(1)  # the one slot is taken: both recalls must queue
        server.reset()
        recalls = [asyncio.create_task(agent.run_message_loop()) for agent in (first, second)]
        await stats_until(lambda stats: stats.queued_pairs == 32)
        server.gate.release()
        first_loop, second_loop = await asyncio.gather(*recalls)
        await blocker

        scored = [r.json for r in server.requests if r.path == "/score"]
        assert len(scored) == 1  # (the blocker was counted before the reset)
        assert len(scored[0]["text_2"]) == 32 and len(set(scored[0]["text_1"])) == 2
        for loop_data in (first_loop, second_loop):
            assert memory_text(15) in loop_data.extras_persistent["memories"]
            assert memory_text(0) not in loop_data.extras_persistent["memories"]
        owners = [t for t in threading.enumerate() if t.name == "a0-reranker-owner"]
        assert len(owners) == 1
    finally:
        server.gate.release()
        await server.close()


async def test_subordinate_recall_uses_its_own_scope(a0: A0) -> None:
    server = await start_server("infinity", scorer=prio_scorer)
    try:
        a0.configure(endpoint=server.url, timeout=10)
        superior = a0.new_agent()
        await a0.seed(superior, 16)
        subordinate = a0.mod("agent").Agent(1, superior.config, superior.context)
        subordinate.hist_add_user_message("alpha beta")
        loop_data: Any = await subordinate.run_message_loop()
        assert memory_text(15) in loop_data.extras_persistent["memories"]
        assert a0.ours("a0_hooks.recall_entry").current() is None
    finally:
        await server.close()
