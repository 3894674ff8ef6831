"""What the plugin costs every agent's prompt, measured with A0's own system-prompt assembly (the
``system_prompt`` extensions of the stand-in: main prompt, every ``agent.system.tool.*.md`` along the
agent's prompt folders, one listing line per skill), with and without the plugin installed.

A0 sends the system prompt with every LLM call of every agent. A tool prompt in the plugin's
``prompts/`` would be paid on each of them, whether or not anyone asks about the reranker; so the
plugin ships none, and its cost is the ``reranker-status`` skill's listing line alone. The status
stays reachable from chat: the agent loads that skill (its body names the ``reranker_status`` tool)
and calls the tool, which A0 finds by its name in the plugin's ``tools/``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from support.a0_layout import PLUGIN_NAME
from support.servers import RunningServer

from .conftest import A0

pytestmark = pytest.mark.anyio

SKILL = "reranker-status"
SHORT_DESCRIPTION_CHARS = 200
LISTING_TOKENS = 60
CHARS_PER_TOKEN = 4  # English text in cl100k_base, the encoding A0's ``helpers/tokens.py`` counts with
A0_TOKEN_BUFFER = 1.1  # ``helpers/tokens.py`` ``APPROX_BUFFER``: A0 adds a tenth to every count


def approximate_tokens(text: str) -> int:
    """A0's ``approximate_tokens`` (tokens times 1.1) with tokens estimated from the length."""
    return round(len(text) / CHARS_PER_TOKEN * A0_TOKEN_BUFFER)


async def system_prompt(a0: A0) -> str:
    """The system message A0 sends on an agent's LLM call: the parts joined with blank lines."""
    agent = a0.new_agent()
    agent.hist_add_user_message("hello")
    loop_data = await agent.run_message_loop()
    return "\n\n".join(loop_data.system)


def remove_plugin(a0: A0, parking: Path) -> None:
    """Take the plugin folder out of A0 (as deleting it would) and clear A0's plugin caches."""
    shutil.move(str(a0.plugin_dir), str(parking))
    a0.plugins.after_plugin_change([PLUGIN_NAME])


def our_listing_line(a0: A0) -> str:
    skills = a0.mod("helpers.skills")
    line_of = a0.mod("extensions.python.system_prompt._13_skills_prompt").skill_line
    [skill] = [s for s in skills.list_skills(agent=a0.new_agent()) if s.name == SKILL]
    return str(line_of(skill))


async def test_the_plugin_adds_only_its_short_skill_listing_to_every_agents_system_prompt(
        a0: A0, tmp_path: Path) -> None:
    with_plugin = await system_prompt(a0)
    line = our_listing_line(a0)
    remove_plugin(a0, tmp_path / "parked")
    without = await system_prompt(a0)

    assert "reranker_status" not in with_plugin  # no tool prompt: the tool is reached through the skill
    assert with_plugin.replace("\n" + line, "", 1) == without  # the listing line is the whole difference
    growth = len(with_plugin) - len(without)
    assert growth == len(line) + 1 <= len(f"**{SKILL}** ") + SHORT_DESCRIPTION_CHARS + 1
    assert approximate_tokens("\n" + line) <= LISTING_TOKENS


async def test_a_disabled_plugin_costs_the_prompt_nothing(a0: A0, tmp_path: Path) -> None:
    with_plugin = await system_prompt(a0)
    a0.plugins.toggle_plugin(PLUGIN_NAME, False)
    disabled = await system_prompt(a0)
    assert SKILL in with_plugin and SKILL not in disabled


async def test_asked_from_chat_the_agent_loads_the_skill_and_its_tool_runs_the_check(
        a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    listed = await agent.call_tool("skills_tool", {"method": "list"})
    assert f"- {SKILL}" in listed.message  # discoverable with A0's own skills tool

    loaded = await agent.call_tool("skills_tool", {"method": "load", "skill_name": SKILL})
    assert loaded.message == f"Loaded skill '{SKILL}' into EXTRAS."
    agent.hist_add_user_message("is the reranker working?")
    loop_data = await agent.run_message_loop()
    body = str(loop_data.extras_persistent["loaded_skills"])
    call = tool_call_in(body)  # what the skill tells the agent to send
    assert call["tool_name"] == "reranker_status"

    server.reset()
    answer = await agent.call_tool(call["tool_name"], call["tool_args"])
    assert answer.message.startswith("Reranker status (a0_reranker)")
    assert "Live test: Reranks correctly" in answer.message and server.count() > 0  # a live probe ran


def tool_call_in(skill_text: str) -> dict[str, Any]:
    """The first JSON tool call of a loaded skill's text (A0's tool-call format)."""
    match = re.search(r"~~~json\s*(\{.*?\})\s*~~~", skill_text, flags=re.DOTALL)
    assert match, "the skill shows no tool call"
    call: dict[str, Any] = json.loads(match.group(1))
    return call


def test_the_skill_description_is_short_enough_for_every_prompt(a0: A0) -> None:
    line = our_listing_line(a0)
    description = line.removeprefix(f"**{SKILL}** ")
    assert len(description) <= SHORT_DESCRIPTION_CHARS
    assert "reranker" in description and "working" in description  # still says when to load it
