"""Nothing secret shows anywhere a user or an operator looks (secrets and edges, round three).

Two sweeps over every place the plugin shows text: the agent's log lines, the counters and
``last_error``, the ``reranker_status`` tool, the panel's API answers (status, Test connection), the
plugin's log records at DEBUG, and the command line (plain and ``--json``):

- a key, and the memories of two recalls that shared one request, against a server that refuses the
  request quoting its Authorization header and every document it got;
- a ``user:password@`` in every position of the endpoint list (invalid settings, as a hand-edited
  ``config.json`` would hold them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from support.servers import RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, SECRET_KEY, prio_scorer

pytestmark = pytest.mark.anyio

MARK = "quillzephyr"  # in every memory of the sweep, nowhere else
QUERY = "where are the backup keys kept"
MINE = [f"{MARK} the backup keys live in the vault, rotated every ninety days",
        f"{MARK} the office plants need water twice a week"]
THEIRS = [f"{MARK} payroll exports for finance run on the first Monday",
          f"{MARK} the staging database password rotates with the quarterly audit"]


class EchoEverything:
    """A 400 quoting the Authorization header and every document the request carried."""

    async def apply(self, request: web.Request, proceed: Any) -> web.StreamResponse:
        body = await request.json()
        documents = body.get("documents") or body.get("texts") or []
        message = f"refused ({request.headers.get('Authorization', '')}): {json.dumps(documents)}"
        return web.json_response({"error": {"message": message, "type": "BadRequestError", "code": 400}}, status=400)


def post(a0: A0, handler: str, body: Any) -> Any:
    return a0.mod("helpers.api").dispatch_plugin_api("a0_reranker", handler, body)


def cli(*args: str) -> str:
    """The command line, as a user runs it: both its outputs."""
    plugins = Path(runtime.__file__).parents[2]  # the layout's usr/plugins: its a0_reranker is this checkout,
    env = {**os.environ, "A0R_TEST_KEY": SECRET_KEY,  # not the one the environment installed
           "PYTHONPATH": os.pathsep.join([str(plugins), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-m", "a0_reranker", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    return done.stdout + done.stderr


async def shared_request_fails(server: RunningServer) -> list[str]:
    """Two recalls with the same query merged into one request while another request is held; the
    server then refuses it, quoting everything. Their fallback messages. The window is the longest, so the
    second recall joins the first's request however late the loaded machine lets it arrive (with the
    default 10 ms, the test once waited for a queue the request had already emptied)."""
    config = RerankerConfig(endpoint=server.url, api="rerank", api_key=SECRET_KEY, timeout=5, batch_window_ms=1000)
    assert await runtime.rerank_async("warm up", ["first", "second"], config=config) is not None
    server.gate.hold(lambda r: r.method == "POST")
    held = asyncio.create_task(runtime.rerank_result_async("another question", ["x", "y"], config=config))
    await server.gate.wait_held(1)
    calls = [asyncio.create_task(runtime.rerank_result_async(QUERY, docs, config=config)) for docs in (MINE, THEIRS)]
    await server.gate.wait_held(2)
    shared = [r.json for r in server.requests if r.method == "POST"][-1]
    assert sorted(shared["documents"]) == sorted(MINE + THEIRS)  # one request carries both recalls
    server.set_fault(lambda r: EchoEverything() if r.method == "POST" else None)
    server.gate.release()
    await held
    return [(await call).message for call in calls]


async def test_a_key_and_the_memories_of_a_shared_request_show_nowhere(
        a0: A0, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server = await start_server("infinity", scorer=prio_scorer, api_key=SECRET_KEY)
    try:
        a0.configure_global(endpoint=server.url, api_key=SECRET_KEY, timeout=5)
        shown = await shared_request_fails(server)
        agent = a0.new_agent(profile="")
        await a0.seed(agent, 8)
        agent.hist_add_user_message("alpha beta")
        await agent.run_message_loop()  # a recall through A0: refused the same way, falls back
        shown += [*a0.recall_lines(agent), (await agent.call_tool("reranker_status", {})).message]
        shown += [(await asyncio.to_thread(post, a0, handler, body)).body for handler, body in (
            ("status", {}), ("test_connection", {"config": {"rerank_endpoint": server.url,
                                                            "rerank_api_key": SECRET_KEY}}))]
        for extra in ([], ["--json"]):
            shown.append(await asyncio.to_thread(cli, "rerank", "--endpoint", server.url, "--key-env", "A0R_TEST_KEY",
                                                 *extra, QUERY, *MINE))
    finally:
        await server.close()
    shown += [json.dumps(runtime.statistics().as_dict()), caplog.text]
    assert any("refused (Bearer ***)" in text for text in shown), shown  # the echo was seen, masked
    for text in shown:
        assert SECRET_KEY not in text and MARK not in text, text


# typed raw, a password may hold a space, a comma or an @: still one entry, masked whole
PASSWORDS = {"plain": "hunter2-c9d4", "a space": "hunter2 c9d4", "a comma and a space": "hunter2, c9d4",
             "an @ and a space": "hunter2@c9d4 x"}
ENTRIES = ["http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"]


def with_password(position: int, password: str) -> list[str]:
    return [f"http://ops{position}:{password}@{entry[7:]}" if i == position else entry
            for i, entry in enumerate(ENTRIES)]


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("position", range(len(ENTRIES)))
async def test_a_password_in_any_endpoint_entry_shows_nowhere(a0: A0, caplog: pytest.LogCaptureFixture,
                                                              position: int, password: str) -> None:
    caplog.set_level(logging.DEBUG)
    entries = with_password(position, PASSWORDS[password])
    (a0.plugin_dir / "config.json").write_text(json.dumps({"rerank_endpoint": ", ".join(entries)}), "utf-8")
    agent = a0.new_agent(profile="")
    shown = [(await agent.call_tool("reranker_status", {})).message,
             (await asyncio.to_thread(post, a0, "status", {})).body,
             (await asyncio.to_thread(post, a0, "test_connection",
                                      {"config": {"rerank_endpoint": ", ".join(entries)}})).body]
    for command in (["probe", *entries], ["probe", ", ".join(entries), "--json"],
                    ["rerank", "--endpoint", ", ".join(entries), "--json", "q", "d"]):
        shown.append(await asyncio.to_thread(cli, *command))
    shown.append(caplog.text)
    assert any("***@" in text for text in shown), shown  # the entry was shown, masked
    assert any(f"entry {position + 1} of 3 must not contain a user name" in text for text in shown), shown
    for text in shown:
        assert "hunter2" not in text and "c9d4" not in text and f"ops{position}" not in text, text
