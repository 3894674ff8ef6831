"""The panel's API handlers, the ``reranker_status`` tool and its skill (issue 4, acceptance 3): the right
API and a positive margin for each server kind from unsaved settings, clear messages for a dead
endpoint and bad input, and the API key in no response, log line or status text."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from typing import Any

import pytest
import yaml

from support.a0_layout import REPO_ROOT
from support.overload import held_burst, learn_pace
from support.servers import serve_in_thread, start_server
from usr.plugins.a0_reranker.core import recall_budget
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.probe_report import NOT_SAVED
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, SECRET_KEY, prio_scorer

# kind, server options, settings the panel would post besides the endpoint, expected API
KINDS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("cohere", {}, {"rerank_model": "rerank-v3.5"}, "rerank"),
    ("jina", {}, {"rerank_model": "jina-reranker-v2-base-multilingual"}, "rerank"),
    ("voyage", {}, {"rerank_model": "rerank-2.5"}, "rerank"),
    ("mixedbread", {}, {"rerank_model": "mixedbread-ai/mxbai-rerank-large-v1"}, "rerank"),
    ("together", {}, {"rerank_model": "Salesforce/Llama-Rank-V1"}, "rerank"),
    ("xinference", {}, {"rerank_model": "bge-reranker-v2-m3"}, "rerank"),
    ("localai", {}, {"rerank_model": "jina-reranker-v1-base-en"}, "rerank"),
    ("siliconflow", {}, {"rerank_model": "BAAI/bge-reranker-v2-m3"}, "rerank"),
    ("infinity", {}, {}, "rerank"),
    ("tei", {}, {}, "rerank"),
    ("vllm", {}, {}, "rerank"),
    ("vllm_qwen3", {}, {}, "qwen3_score"),
    ("vllm_qwen3_templated", {}, {}, "rerank"),  # the server applies the Qwen3 template: its own /rerank
    ("llamacpp", {}, {}, "rerank"),
    ("sglang", {}, {}, "rerank"),
    ("litellm", {}, {"rerank_model": "rerank-english-v3.0"}, "rerank"),
]


def post(a0: A0, handler: str, body: Any, **kwargs: Any) -> Any:
    """Call ``/api/plugins/a0_reranker/<handler>`` as A0's Flask route does (its own thread and loop)."""
    return a0.mod("helpers.api").dispatch_plugin_api("a0_reranker", handler, body, **kwargs)


@pytest.mark.parametrize("case", KINDS, ids=[case[0] for case in KINDS])
def test_test_connection_reports_the_api_and_a_positive_margin(a0: A0, case: Any) -> None:
    kind, options, settings, api = case
    with serve_in_thread(kind, **options) as server:
        form = {"rerank_endpoint": server.url, "rerank_timeout": "5", **settings}
        first = post(a0, "test_connection", {"config": form})
        probes_after_first = server.count()
        second = post(a0, "test_connection", {"config": form})
    assert first.status == 200 and first.mimetype == "application/json"
    reply = first.json()
    assert reply["ok"] is True and reply["success"] is True, reply["message"]
    assert reply["api"] == api and reply["margin"] > 0
    assert reply["message"].startswith("Reranks correctly") and reply["note"] == NOT_SAVED
    assert second.json()["ok"] is True and server.count() > probes_after_first > 0  # live each click, no cache
    assert not (a0.plugin_dir / "config.json").exists()  # Test does not save


def test_test_connection_to_a_dead_endpoint_says_so_clearly(a0: A0) -> None:
    with serve_in_thread("infinity") as server:
        url = server.url
    reply = post(a0, "test_connection", {"config": {"rerank_endpoint": url, "rerank_timeout": 2}}).json()
    assert reply["ok"] is False and reply["success"] is False
    assert reply["message"].startswith("Not working:") and reply["note"] == NOT_SAVED
    assert re.search(r"connect|refused|reach", reply["message"], re.IGNORECASE)


def test_test_connection_with_a_forced_api_that_ranks_wrongly_hints_at_the_setting(a0: A0) -> None:
    """The panel's user sets ``rerank_api``: the hint names that setting, not the CLI's ``--api``."""
    with serve_in_thread("vllm_qwen3") as server:
        reply = post(a0, "test_connection", {"config": {"rerank_endpoint": server.url, "rerank_api": "rerank"}}).json()
    assert reply["ok"] is False and "ranks wrongly" in reply["message"]
    assert reply["message"].endswith("Try rerank_api auto.") and "--api" not in reply["message"]


def test_test_connection_validates_the_form_key_by_key(a0: A0) -> None:
    form = {"rerank_endpoint": "ftp://host", "rerank_timeout": "soon", "rerank_candidates": 0,
            "rerank_api_key": SECRET_KEY}
    response = post(a0, "test_connection", {"config": form})
    reply = response.json()
    assert response.status == 200 and reply["ok"] is False
    assert set(reply["errors"]) == {"rerank_endpoint", "rerank_timeout", "rerank_candidates"}
    assert "http://" in reply["errors"]["rerank_endpoint"] and "number" in reply["errors"]["rerank_timeout"]
    assert "between 1 and 1000" in reply["errors"]["rerank_candidates"]
    assert reply["message"].startswith("Fix these settings first")
    assert SECRET_KEY not in response.body


@pytest.mark.parametrize("body", [None, [], {"config": "x"}, {"other": 1}])
def test_test_connection_answers_json_to_any_body(a0: A0, body: Any) -> None:
    response = post(a0, "test_connection", body)
    assert response.status == 200 and response.json()["ok"] is False
    assert "config" in response.json()["message"]


def test_test_connection_without_endpoint_asks_for_one(a0: A0) -> None:
    reply = post(a0, "test_connection", {"config": {"rerank_endpoint": "  "}}).json()
    assert reply["ok"] is False and "endpoint" in reply["message"]


def test_handlers_keep_a0s_auth_and_csrf_and_work_while_disabled(a0: A0) -> None:
    assert post(a0, "status", {}, csrf_ok=False).status == 403
    assert post(a0, "test_connection", {"config": {}}, csrf_ok=False).status == 403
    a0.plugins.toggle_plugin("a0_reranker", False)
    reply = post(a0, "status", {}).json()
    assert reply["success"] is True and reply["plugin_enabled"] is False


@pytest.mark.anyio
async def test_status_reports_counters_and_state_without_the_key(a0: A0) -> None:
    server = await start_server("infinity", scorer=prio_scorer, api_key=SECRET_KEY)
    try:
        a0.configure_global(endpoint=server.url, api_key=SECRET_KEY, timeout=10)
        agent = a0.new_agent(profile="")
        await a0.seed(agent, 16)
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()
        response = await asyncio.to_thread(post, a0, "status", {})
    finally:
        await server.close()
    reply = response.json()
    assert reply["configured"] and reply["rerank_enabled"] and reply["plugin_enabled"]
    assert reply["mode"] == "live" and reply["memory_wrapper_installed"] and reply["api_key_set"]
    stats = reply["statistics"]
    assert stats["reranked"] == 1 and stats["last_api"] == "rerank" and stats["breakers"] == {server.url: "closed"}
    assert SECRET_KEY not in response.body


def test_an_unknown_scope_is_refused_without_echoing_what_was_sent(a0: A0) -> None:
    sent = "../../" + "A" * 100_000 + "<img src=x onerror=alert(1)>"
    reply = post(a0, "status", {"project_name": sent}).json()
    assert reply["success"] is False and "project_name" in reply["message"]
    assert "onerror" not in reply["message"] and len(reply["message"]) < 200, len(reply["message"])


@pytest.mark.anyio
async def test_a_blank_api_key_is_not_reported_as_set(a0: A0) -> None:
    """The key is trimmed as every text setting is: a blank one sends no Authorization header at all."""
    a0.configure_global(endpoint="http://127.0.0.1:9", api_key="   ")
    reply: dict[str, Any] = (await asyncio.to_thread(post, a0, "status", {})).json()
    tool = (await a0.new_agent(profile="").call_tool("reranker_status", {})).message
    assert reply["mode"] == "live"
    assert reply["api_key_set"] is False and "API key: not set" in tool, (reply["api_key_set"], tool)


@pytest.mark.anyio
async def test_the_key_never_appears_in_logs_replies_or_status(a0: A0, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server = await start_server("infinity", scorer=prio_scorer, api_key=SECRET_KEY)
    texts: list[str] = []
    try:
        a0.configure(endpoint=server.url, api_key=SECRET_KEY, timeout=5)
        agent = a0.new_agent()
        await a0.seed(agent, 16)
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()  # reranked with the key
        wrong = SECRET_KEY[::-1]
        a0.configure(endpoint=server.url, api_key=wrong, timeout=5)
        agent.hist_add_user_message("alpha beta again")
        await agent.run_message_loop()  # 401: falls back
        texts.append((await agent.call_tool("reranker_status", {})).message)
        for key, works in ((wrong, False), (SECRET_KEY, True)):
            form = {"rerank_endpoint": server.url, "rerank_api_key": key}
            reply = await asyncio.to_thread(post, a0, "test_connection", {"config": form})
            assert reply.json()["ok"] is works
            texts.append(reply.body)
        texts.append((await asyncio.to_thread(post, a0, "status", {})).body)
    finally:
        await server.close()
    lines = a0.recall_lines(agent)
    assert lines[0].startswith("Reranked recall") and "fell back" in lines[-1]
    texts += [str(item.output()) for item in agent.context.log.logs] + [caplog.text]
    for text in texts:
        assert SECRET_KEY not in text and SECRET_KEY[::-1] not in text


PASSWORD = "hunter2-b7c1"
WITH_PASSWORD = f"http://admin7:{PASSWORD}@127.0.0.1:2"
MASKED = "http://***@127.0.0.1:2"


# how invalid settings arrive (a hand-edited config.json, an env override), and the endpoint then shown
@pytest.mark.parametrize(("source", "settings", "shown"), [
    ("config.json", {"rerank_endpoint": f"http://127.0.0.1:1, {WITH_PASSWORD}"}, f"http://127.0.0.1:1, {MASKED}"),
    ("config.json", {"rerank_endpoint": f"{WITH_PASSWORD}\nhttp://127.0.0.1:1"}, f"{MASKED}, http://127.0.0.1:1"),
    ("config.json", {"rerank_endpoint": ["ftp://127.0.0.1:1", "http://127.0.0.1:3", WITH_PASSWORD]},
     f"ftp://127.0.0.1:1, http://127.0.0.1:3, {MASKED}"),
    ("config.json", {"rerank_endpoint": "http://127.0.0.1:1", "rerank_api": f"{WITH_PASSWORD}/{'v' * 60}"},
     "http://127.0.0.1:1"),  # pasted into the wrong field, long enough to be shortened where it is quoted
    ("environment", {"rerank_endpoint": f"http://127.0.0.1:1 {WITH_PASSWORD}"}, f"http://127.0.0.1:1, {MASKED}"),
], ids=["later entry", "first entry", "json list", "another field", "env override"])
@pytest.mark.anyio
async def test_invalid_settings_never_show_a_password(a0: A0, monkeypatch: pytest.MonkeyPatch, source: str,
                                                     settings: dict[str, Any], shown: str) -> None:
    if source == "environment":  # A0 applies its env overrides to the defaults, when no config.json is saved
        for key, value in settings.items():
            monkeypatch.setenv(f"A0_SET_a0_reranker__{key}", value)
    else:
        (a0.plugin_dir / "config.json").write_text(json.dumps(settings), encoding="utf-8")
    response = await asyncio.to_thread(post, a0, "status", {})  # what the panel shows
    tool = (await a0.new_agent(profile="").call_tool("reranker_status", {})).message  # what the agent reads
    reply = response.json()
    assert reply["mode"] == "invalid settings" and reply["settings_problems"], reply
    assert reply["endpoint"] == shown and f"- Endpoint: {shown};" in tool
    for text in (response.body, tool):
        assert PASSWORD not in text and "admin7" not in text and PASSWORD[:4] not in text, text


@pytest.mark.anyio
async def test_status_tool_reports_a_live_probe_and_the_counters(a0: A0) -> None:
    server = await start_server("tei", scorer=prio_scorer)
    try:
        a0.configure(endpoint=server.url, timeout=10)
        agent = a0.new_agent()
        await a0.seed(agent, 16)
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()
        probes_before = server.count("/rerank")
        response = await agent.call_tool("reranker_status", {})
        assert server.count("/rerank") > probes_before  # the tool probes live
    finally:
        await server.close()
    text = response.message
    assert response.break_loop is False
    assert "Mode: live" in text and f"Endpoint: {server.url}" in text and "API key: not set" in text
    assert "Live test: Reranks correctly" in text and "Resolved API: rerank at /rerank (server tei" in text
    assert "Reranks: 1 of 1 succeeded; fallbacks: none" in text and "Memory search wrapped: yes" in text


@pytest.mark.anyio
async def test_the_status_tool_lets_the_other_chats_run_while_it_waits_for_the_live_state(a0: A0) -> None:
    """A0 runs every chat on one event loop: while the tool waits for the reranker's busy loop, the other chats
    go on (here one of them is what frees it), and the report still shows each server's live state."""
    server = await start_server("infinity", scorer=prio_scorer)
    entered, release = threading.Event(), threading.Event()

    async def busy() -> None:  # the owner loop's thread held, as by long work, until another chat moves on
        entered.set()
        release.wait()

    async def another_chat() -> None:
        release.set()

    try:
        a0.configure(endpoint=server.url, timeout=10)
        agent = a0.new_agent()
        await a0.seed(agent, 16)
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()  # the server is known: the live state has a line for it
        held = runtime.runtime().owner.submit(busy)
        await asyncio.to_thread(entered.wait)
        text, _ = await asyncio.gather(agent.call_tool("reranker_status", {}), another_chat())
        await asyncio.wrap_future(held)
    finally:
        release.set()
        await server.close()
    assert re.search(rf"- Server {re.escape(server.url)}: in rotation", text.message), text.message


@pytest.mark.anyio
async def test_status_tool_and_test_connection_report_each_replica(a0: A0) -> None:
    """Two replicas and a third that is down: Test connection has one row each and names the dead one;
    the status tool shows each replica's probe and, from the counters, each server's state and share."""
    first, second = await start_server("tei", scorer=prio_scorer), await start_server("infinity", scorer=prio_scorer)
    gone = await start_server("infinity")
    await gone.close()
    endpoint = f"{first.url}, {second.url}, {gone.url}"
    try:
        a0.configure(endpoint=endpoint, timeout=10)
        agent = a0.new_agent()
        await a0.seed(agent, 16)
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()
        text = (await agent.call_tool("reranker_status", {})).message
        form = {"rerank_endpoint": endpoint, "rerank_timeout": "5"}
        reply = (await asyncio.to_thread(post, a0, "test_connection", {"config": form})).json()
        # the scope whose settings name the replicas (the panel lists the servers of the scope it shows)
        stats = (await asyncio.to_thread(post, a0, "status", {"agent_profile": "agent0"})).json()["statistics"]
    finally:
        await first.close()
        await second.close()
    assert reply["ok"] is False and reply["success"] is False and reply["note"] == NOT_SAVED
    assert reply["message"] == (f"2 of 3 replicas rank correctly; failing: replica 3 {gone.url} (not working). "
                                "Fix or remove the failing ones.")
    rows = reply["replicas"]
    assert [(r["endpoint"], r["ok"], r["api"], r["path"]) for r in rows] == [
        (first.url, True, "rerank", "/rerank"), (second.url, True, "rerank", "/rerank"), (gone.url, False, "", "")]
    assert all(r["margin"] > 0 and r["latency_ms"] > 0 for r in rows[:2]) and "note" not in rows[0]
    assert rows[2]["message"].startswith("Not working:") and re.search(r"connect", rows[2]["message"])

    assert f"- Live test: 2 of 3 replicas rank correctly; failing: replica 3 {gone.url}" in text
    assert f"- Replica 1 {first.url}: Reranks correctly: tei speaks rerank at /rerank" in text
    assert f"- Replica 3 {gone.url}: Not working:" in text and "Resolved API" not in text
    servers = {r["url"]: r for r in stats["replicas"]}
    assert servers[first.url]["pairs"] + servers[second.url]["pairs"] > 0
    assert servers.get(gone.url, {"pairs": 0})["pairs"] == 0
    for url, server in servers.items():
        share = f"{server['share']:.0%} of pairs ({server['pairs']:,})"
        assert re.search(rf"- Server {re.escape(url)}: (in rotation|ejected|probing back) \(breaker [a-z-]+\); "
                         rf"{re.escape(share)}; .*; \d+ in flight", text), text


@pytest.mark.anyio
async def test_one_server_listed_in_two_letter_cases_is_one_replica(a0: A0) -> None:
    """The same server twice (scheme in upper case, a pasted path) gets one concurrency cap, one breaker,
    no hedging, and one row in the status."""
    server = await start_server("infinity", scorer=prio_scorer)
    try:
        a0.configure(endpoint=f"{server.url.upper()}, {server.url}/rerank", timeout=10)
        agent = a0.new_agent()
        await a0.seed(agent, 16)
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()
        text = (await agent.call_tool("reranker_status", {})).message
        reply = (await asyncio.to_thread(post, a0, "status", {"agent_profile": "agent0"})).json()
    finally:
        await server.close()
    assert reply["endpoint"] == server.url and reply["statistics"]["reranked"] == 1
    assert [replica["url"] for replica in reply["statistics"]["replicas"]] == [server.url]
    assert reply["statistics"]["breakers"] == {server.url: "closed"}
    assert text.count("- Server ") == 1 and f"- Endpoint: {server.url};" in text and "- Replica " not in text


@pytest.mark.anyio
async def test_status_shows_the_pool_and_says_when_pools_are_starved(a0: A0) -> None:
    server = await start_server("infinity", scorer=prio_scorer)
    try:
        a0.configure_global(endpoint=server.url, timeout=10)
        agent = a0.new_agent(profile="")
        await a0.seed(agent, 4)  # four memories: every pool holds exactly what the recall returns
        for _ in range(5):
            await agent.call_tool("memory_load", {"query": "alpha beta"})
        reply = (await asyncio.to_thread(post, a0, "status", {})).json()
        tool = (await agent.call_tool("reranker_status", {})).message
    finally:
        await server.close()
    assert reply["statistics"]["pool"] == {"recalls": 5, "mean_size": 4.0, "starved_fraction": 1.0,
                                           "rescued": 0, "floor_dropped": 0}
    [hint] = reply["hints"]
    assert hint.startswith("Pools are starved: in 100% of 5 recalls")
    assert "Lower rerank_pool_threshold (now 0.5) or raise rerank_candidates (now 20)" in hint
    assert "- Pool: 5 recalls, 4.0 memories on average, 100% with nothing to choose; 0 rescued" in tool
    assert f"- Hint: {hint}" in tool


@pytest.mark.anyio
async def test_status_says_the_reranker_is_overloaded_by_how_much_and_what_helps(a0: A0) -> None:
    """Overload, "say it": recalls shed at once are counted under their own reason, and while they are
    the status (the panel's API and the agent's tool) says so, with the last minute's rates."""
    server = await start_server("vllm", scorer=prio_scorer)
    try:
        a0.configure_global(endpoint=server.url, timeout=5)
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=5.0, max_concurrency=1)
        await learn_pace(config, server, 0.25)
        calls, stats = await held_burst(config, server, 40)
        server.gate.release()
        await asyncio.gather(*calls)
        reply = (await asyncio.to_thread(post, a0, "status", {})).json()
        tool = (await a0.new_agent(profile="").call_tool("reranker_status", {})).message
    finally:
        await server.close()
    shed = stats.fallbacks["overload"]
    assert reply["statistics"]["shed"] == shed and reply["statistics"]["fallbacks"]["overload"] == shed
    load = reply["statistics"]["load"]
    assert load["shed_per_s"] > 0 and load["offered_per_s"] > load["goodput_per_s"] > 0
    [hint] = [h for h in reply["hints"] if h.startswith("The reranker is overloaded")]
    assert "recalls/s" in hint and "another replica" in hint and "rerank_timeout (now 5 s)" in hint
    assert "- Hint: The reranker is overloaded: over the last minute agents asked for" in tool  # rates of its own time
    assert "- Last minute:" in tool and "/s shed; queue wait p50/p95" in tool


@pytest.mark.anyio
async def test_a_timeout_past_a0s_recall_limit_is_warned(a0: A0) -> None:
    a0.configure_global(endpoint="http://127.0.0.1:9", timeout=20)
    reply = (await asyncio.to_thread(post, a0, "status", {})).json()
    [warning] = reply["settings_warnings"]
    assert warning.startswith("rerank_timeout 20 s: a recall reranks two searches") and "14 s or below" in warning
    tool = (await a0.new_agent(profile="").call_tool("reranker_status", {})).message
    assert f"- Setting warning: {warning}" in tool
    with serve_in_thread("infinity") as server:
        slow = post(a0, "test_connection", {"config": {"rerank_endpoint": server.url, "rerank_timeout": "20"}})
        fine = post(a0, "test_connection", {"config": {"rerank_endpoint": server.url, "rerank_timeout": "13"}})
    assert slow.json()["ok"] and slow.json()["warnings"] == [warning]
    assert fine.json()["ok"] and fine.json()["warnings"] == []
    assert post(a0, "status", {}).json()["hints"] == []  # no pool seen yet: nothing to say


@pytest.mark.anyio
async def test_a0s_llm_recall_steps_leave_the_reranker_less_and_status_and_test_say_so(a0: A0) -> None:
    """A timeout that fits A0's 30 s does not fit what query preparation and the post-filter leave."""
    timeout = recall_budget.longest_safe_timeout_s() - 2  # fits the whole 30 s
    a0.configure_global(endpoint="http://127.0.0.1:9", timeout=timeout)
    assert (await asyncio.to_thread(post, a0, "status", {})).json()["settings_warnings"] == []
    memory = a0.plugins.get_default_plugin_config("_memory")  # A0 saves _memory's settings whole
    a0.plugins.save_plugin_config("_memory", "", "", {**memory, "memory_recall_query_prep": True,
                                                      "memory_recall_post_filter": True})

    reply = (await asyncio.to_thread(post, a0, "status", {})).json()
    [warning] = reply["settings_warnings"]
    assert "query preparation and post-filter LLM calls" in warning and "Keep it at" in warning
    assert "leaves after its query preparation and post-filter LLM calls" in reply["recall_budget"]
    tool = (await a0.new_agent(profile="").call_tool("reranker_status", {})).message
    assert f"- Setting warning: {warning}" in tool and f"- Recall budget: {reply['recall_budget']}" in tool
    with serve_in_thread("infinity") as server:
        tested = post(a0, "test_connection", {"config": {"rerank_endpoint": server.url, "rerank_timeout": timeout},
                                              "project_name": "", "agent_profile": ""})
    assert tested.json()["ok"] and tested.json()["warnings"] == [warning]


@pytest.mark.anyio
@pytest.mark.parametrize(("settings", "mode"), [({"enabled": False, "endpoint": "http://127.0.0.1:9"}, "off"),
                                                ({"endpoint": ""}, "not configured")])
async def test_no_recall_budget_is_shown_while_the_reranker_takes_no_part(a0: A0, settings: dict[str, Any],
                                                                          mode: str) -> None:
    """Off or without an endpoint, a recall never waits for the reranker: no budget line in the API or tool."""
    a0.configure_global(**settings)
    reply = (await asyncio.to_thread(post, a0, "status", {})).json()
    tool = (await a0.new_agent(profile="").call_tool("reranker_status", {})).message
    assert reply["mode"] == mode and reply["recall_budget"] == ""
    assert "Recall budget" not in tool and "recall limit" not in tool, tool


@pytest.mark.anyio
async def test_status_tool_when_not_configured(a0: A0) -> None:
    response = await a0.new_agent().call_tool("reranker_status", {})
    assert "inert: no endpoint is set" in response.message and "Live test" not in response.message


def test_the_skill_is_what_a0_expects_and_no_tool_prompt_is_shipped() -> None:
    assert not list(REPO_ROOT.glob("prompts/agent.system.tool.*.md"))  # every agent would pay for it each turn
    text = (REPO_ROOT / "skills" / "reranker-status" / "SKILL.md").read_text(encoding="utf-8")
    _, front, body = text.split("---", 2)
    meta = yaml.safe_load(front)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and meta["name"] == "reranker-status"
    assert 0 < len(meta["description"]) <= 1024
    wanted = ("is the reranker working", "test the reranker", "which reranker API")
    for phrase in wanted:
        assert phrase in meta["triggers"] and phrase in meta["description"]
    assert '"tool_name": "reranker_status"' in body
