"""Settings per agent profile (issue 14, acceptance 4): plugin.yaml turns A0's agent-profile scope on, a
sub-agent whose profile has its own settings recalls with them (another reranker, or none) while the
superior keeps the global ones, and the settings panel's status follows the scope it shows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from support.a0_layout import REPO_ROOT
from support.servers import RunningServer, start_server

from .conftest import A0, MEM_FILTER, PROFILE, memories_prompt, memory_text, prio_scorer

pytestmark = pytest.mark.anyio

SUB_PROFILE = "researcher"
MEMORIES = 16


@pytest.fixture
async def two_servers(a0: A0) -> AsyncIterator[tuple[RunningServer, RunningServer]]:
    """The global reranker and the one the sub-agent's profile names."""
    first, second = await start_server("infinity", scorer=prio_scorer), await start_server("tei", scorer=prio_scorer)
    yield first, second
    await first.close()
    await second.close()


def reranks(server: RunningServer) -> int:
    """Rerank requests carrying our memories (detection probes and GETs left out)."""
    return sum(1 for r in server.requests if r.method == "POST" and "prio" in r.text)


def reranked_best_five() -> list[Any]:
    return [type("Doc", (), {"page_content": memory_text(k)})() for k in range(15, 10, -1)]


async def superior_recall(agent: Any) -> str:
    agent.hist_add_user_message("alpha beta")
    loop_data = await agent.run_message_loop()
    return str(loop_data.extras_persistent["memories"])


async def delegate(agent: Any, profile: str) -> tuple[Any, str]:
    """A0's call_subordinate with a profile; returns the subordinate and the memories its recall used."""
    response = await agent.call_tool("call_subordinate", {"message": "alpha beta", "profile": profile})
    return agent.get_data("_subordinate"), response.message


def test_plugin_yaml_turns_on_the_agent_profile_scope(a0: A0) -> None:
    manifest = yaml.safe_load((REPO_ROOT / "plugin.yaml").read_text(encoding="utf-8"))
    assert manifest["per_agent_config"] is True and manifest["per_project_config"] is True
    meta = a0.plugins.get_plugin_meta("a0_reranker")
    assert meta.per_agent_config and meta.per_project_config


async def test_a_sub_agent_profiles_reranker_overrides_the_global_one_for_that_agent_only(
        a0: A0, two_servers: tuple[RunningServer, RunningServer]) -> None:
    global_server, profile_server = two_servers
    a0.configure_global(endpoint=global_server.url, timeout=10)
    a0.configure(profile=SUB_PROFILE, endpoint=profile_server.url, timeout=10)
    superior = a0.new_agent(profile=PROFILE)
    await a0.seed(superior, MEMORIES)

    assert await superior_recall(superior) == memories_prompt(superior, reranked_best_five())
    assert reranks(global_server) >= 1 and reranks(profile_server) == 0
    before = reranks(global_server)

    sub, memories = await delegate(superior, SUB_PROFILE)
    assert sub.config.profile == SUB_PROFILE and sub.number == superior.number + 1 and sub.context is superior.context
    assert memories == memories_prompt(sub, reranked_best_five())
    assert reranks(profile_server) >= 1 and reranks(global_server) == before  # the sub-agent's own reranker only

    await superior_recall(superior)  # and the superior still uses the global one
    assert reranks(global_server) > before


async def test_a_profile_with_reranking_off_recalls_stock_while_the_superior_is_reranked(
        a0: A0, two_servers: tuple[RunningServer, RunningServer]) -> None:
    server, _ = two_servers
    a0.configure_global(endpoint=server.url, timeout=10)
    a0.configure(profile=SUB_PROFILE, endpoint=server.url, timeout=10, enabled=False)  # as the panel saves it
    superior = a0.new_agent(profile=PROFILE)
    await a0.seed(superior, MEMORIES)
    calls = await a0.store_calls(superior)  # the store is shared: this records the sub-agent's searches too
    sub, memories = await delegate(superior, SUB_PROFILE)
    assert [c["k"] for c in calls] == [12, 8]  # A0's own limits: no pool was fetched for the sub-agent
    stock = await a0.original_search(sub, query=calls[0]["query"], limit=12, threshold=0.7, filter=MEM_FILTER)
    assert memories == memories_prompt(sub, stock) and reranks(server) == 0
    assert await superior_recall(superior) == memories_prompt(superior, reranked_best_five())
    assert reranks(server) >= 1


def test_the_panels_status_shows_the_settings_and_toggle_of_the_scope_it_shows(a0: A0) -> None:
    a0.configure_global(endpoint="http://global.lan:8002")
    a0.configure(profile=SUB_PROFILE, endpoint="http://researcher.lan:8002")
    a0.plugins.toggle_plugin("a0_reranker", False, agent_profile=SUB_PROFILE)

    def status(**scope: str) -> dict[str, Any]:
        reply: dict[str, Any] = a0.mod("helpers.api").dispatch_plugin_api("a0_reranker", "status", scope).json()
        return reply

    everywhere, researcher = status(), status(agent_profile=SUB_PROFILE)
    listed = {p["key"]: p["label"] for p in a0.mod("helpers.subagents").get_all_agents_list()}
    assert everywhere["scope"] == {"project_name": "", "agent_profile": "", "project_label": "",
                                   "agent_profile_label": ""}
    assert everywhere["endpoint"] == "http://global.lan:8002" and everywhere["plugin_enabled"] is True
    assert researcher["scope"] == {"project_name": "", "agent_profile": SUB_PROFILE, "project_label": "",
                                   "agent_profile_label": listed.get(SUB_PROFILE, SUB_PROFILE)}
    assert researcher["endpoint"] == "http://researcher.lan:8002" and researcher["plugin_enabled"] is False
    assert status(agent_profile="coder")["endpoint"] == "http://global.lan:8002"  # no file of its own: global's
    refused = status(agent_profile="../../etc")
    assert refused["success"] is False and "scope" in refused["message"]
