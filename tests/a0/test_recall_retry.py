"""A recall whose request had to be sent again is still reranked, and its log line says so
(issue: resilience, counters and display)."""

from __future__ import annotations

from typing import Any

import pytest

from support.servers import RecordedRequest, Respond, RunningServer, start_server
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, prio_scorer

pytestmark = pytest.mark.anyio

OVERLOADED = Respond(503, {"error": {"message": "model is overloaded", "type": None, "param": None, "code": 503}})


async def test_a_recall_saved_by_a_retry_says_so_in_its_log_line(a0: A0, server: RunningServer) -> None:
    a0.configure(endpoint=server.url, timeout=10)
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    failed = []

    def first_rerank_fails(request: RecordedRequest) -> Any:
        if request.path == "/rerank" and not failed and "alpha" in request.text:
            failed.append(request)
            return OVERLOADED
        return None

    server.set_fault(first_rerank_fails)
    agent.hist_add_user_message("alpha beta")
    await agent.run_message_loop()
    lines = a0.recall_lines(agent)
    assert failed and len(lines) == 1
    assert lines[0].startswith("Reranked recall: 16 candidates -> 12 returned in ")
    assert "via rerank after 1 retry;" in lines[0]
    stats = runtime.statistics()
    assert stats.retries == 1 and stats.reranked_after_retry == 1 and stats.fallback_total == 0


async def test_the_log_names_the_replica_only_when_a_recall_failed_over(a0: A0, server: RunningServer) -> None:
    other = await start_server("infinity", scorer=prio_scorer)
    try:
        a0.configure(endpoint=f"{server.url}, {other.url}", timeout=10)
        agent = a0.new_agent()
        await a0.seed(agent, 16)
        failed: list[RecordedRequest] = []

        def first_rerank_anywhere_fails(request: RecordedRequest) -> Any:
            if request.path == "/rerank" and not failed and "alpha" in request.text:
                failed.append(request)
                return OVERLOADED
            return None

        agent.hist_add_user_message("alpha beta")  # warm-up: both replicas detected, a failover has somewhere to go
        await agent.run_message_loop()
        for replica in (server, other):
            replica.set_fault(first_rerank_anywhere_fails)
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()
        agent.hist_add_user_message("alpha gamma")
        await agent.run_message_loop()
        warm, first, second = a0.recall_lines(agent)
        assert "failed over" not in warm
        answered_by = other.url if server.count("/rerank") and failed[0] in server.requests else server.url
        assert f"(failed over to {answered_by})" in first
        assert "failed over" not in second and server.url not in second and other.url not in second
        assert runtime.statistics().failovers == 1
    finally:
        await other.close()
