"""The ``reranker_status`` tool reports this agent's settings next to counters of the whole process: its text
says which is which, or an agent reads another agent's fallbacks as its own."""

from __future__ import annotations

import pytest

from support.outages import closed_port_url
from support.servers import start_server

from .conftest import A0, PROFILE, prio_scorer

pytestmark = pytest.mark.anyio


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
