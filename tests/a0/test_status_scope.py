"""The ``reranker_status`` tool reports this agent's settings next to counters of the whole process: its text
says which is which, or an agent reads another agent's fallbacks as its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from support.outages import closed_port_url
from support.servers import start_server

from .conftest import A0, PROFILE, prio_scorer

pytestmark = pytest.mark.anyio


def post(a0: A0, handler: str, body: Any) -> Any:
    """Call ``/api/plugins/a0_reranker/<handler>`` as A0's Flask route does (the panel's status)."""
    return a0.mod("helpers.api").dispatch_plugin_api("a0_reranker", handler, body)


async def test_the_status_tool_says_its_counters_are_every_agents(a0: A0) -> None:
    """An agent of another profile, whose endpoint is down, fell back; this agent's own endpoint works. Its
    status shows that fallback next to its own endpoint and live test: the text must say the counters count
    every agent of the process, not this agent's recalls alone."""
    server = await start_server("infinity", scorer=prio_scorer)
    try:
        a0.configure_global(endpoint=server.url, timeout=10)
        a0.configure(PROFILE, endpoint=closed_port_url(), timeout=10)
        other = a0.new_agent(PROFILE)
        await a0.seed(other, 16)
        other.hist_add_user_message("alpha beta")
        await other.run_message_loop()
        text = (await a0.new_agent(profile="").call_tool("reranker_status", {})).message
    finally:
        await server.close()
    lines = text.splitlines()
    counters = next(i for i, line in enumerate(lines) if line.startswith("- Reranks:"))
    assert "fallbacks: connect 1" in lines[counters] and f"Endpoint: {server.url}" in text  # another's fallback
    said = [line for line in lines[:counters] if "every agent" in line and "process" in line]
    assert said, text  # before the counters: which figures are the process's
    assert "this agent's settings" in said[0], said  # and which are this agent's


async def test_a_replica_removed_from_the_settings_leaves_the_status_and_its_breaker_outlives_it(a0: A0) -> None:
    """A dead replica ejected (breaker open), then replaced by a working one: the tool and the panel list the
    servers of the settings in use, not the removed one with its old breaker. Put back, it is listed again,
    still ejected: its state was kept, only not shown (the next recall is refused without a connection)."""
    server, dead = await start_server("infinity", scorer=prio_scorer), closed_port_url()
    await a0.seed(a0.new_agent(), 16)

    async def recall_and_status() -> tuple[str, dict[str, Any]]:
        agent = a0.new_agent()  # a new chat: its first message recalls
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()
        text = (await agent.call_tool("reranker_status", {})).message
        reply = (await asyncio.to_thread(post, a0, "status", {"agent_profile": PROFILE})).json()
        return text, reply["statistics"]

    try:
        a0.configure(endpoint=dead, timeout=10, max_retries=0, breaker_failures=1, breaker_cooldown=3600)
        text, stats = await recall_and_status()
        assert stats["breakers"] == {dead: "open"} and f"- Server {dead}: ejected" in text  # as the user saw it
        a0.configure(endpoint=server.url)  # the dead replica replaced
        text, stats = await recall_and_status()
        assert stats["reranked"] >= 1
        assert [r["url"] for r in stats["replicas"]] == [server.url] and stats["breakers"] == {server.url: "closed"}
        assert f"- Server {dead}" not in text and f"- Server {server.url}: in rotation" in text  # "last error" may
        # still quote it: it is the process's last error, not a server listed
        a0.configure(endpoint=dead)  # put back at once: still ejected, nothing sent to it
        fallbacks = dict(stats["fallbacks"])
        text, stats = await recall_and_status()
    finally:
        await server.close()
    assert stats["breakers"] == {dead: "open"} and f"- Server {dead}: ejected" in text
    assert stats["fallbacks"].get("breaker_open", 0) > fallbacks.get("breaker_open", 0)
    assert stats["fallbacks"].get("connect") == fallbacks.get("connect")
