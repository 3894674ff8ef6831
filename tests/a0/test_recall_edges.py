"""Recalls at the edges: a failed pool search logs only its masked text, and a recall still running when an
update in place or an uninstall retires its code falls back to stock without starting the old code again."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import Any

import pytest

from support.servers import RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.process.singletons import ANCHOR_MODULE, OWNER_THREAD
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, prio_scorer
from .test_recall_pool import ABOVE, BELOW, MESSAGE, on_pool_search, search_as_recall, seed

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server(a0: A0) -> Any:
    srv = await start_server("infinity", scorer=prio_scorer)
    a0.configure(endpoint=srv.url)
    yield srv
    await srv.close()


def our_log(caplog: pytest.LogCaptureFixture) -> str:
    """The plugin's log records as a handler writes them, tracebacks included."""
    formatter = logging.Formatter()
    return "\n".join(formatter.format(r) for r in caplog.records if r.name.startswith("a0_reranker"))


async def test_a_pool_search_error_quoting_the_query_and_a_memory_is_not_logged_unmasked(
        a0: A0, server: RunningServer, caplog: pytest.LogCaptureFixture) -> None:
    """The store's error on the widened search quotes the query and a memory. The fallback message masks
    both (security.md: memory contents never reach the log or the panel); the log line must too, but it
    wrote the store's exception with its traceback as raised."""
    caplog.set_level(logging.DEBUG)
    agent = a0.new_agent()
    texts = await seed(a0, agent, ABOVE + BELOW, list(range(20)))
    memory = await a0.Memory.get(agent)

    async def refusing(query: str) -> None:
        raise RuntimeError(f"the store refused {query!r} next to {texts[0]!r}")

    on_pool_search(memory, refusing)
    found = await search_as_recall(a0, agent, memory)
    assert [d.page_content for d in found] == texts[:6]  # A0's answer
    last_error = runtime.statistics().last_error
    assert "the store refused" in last_error and MESSAGE not in last_error  # the kept message is masked
    logged = our_log(caplog)
    assert "the pool search failed" in logged
    assert MESSAGE not in logged and texts[0] not in logged, logged


def owner_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == OWNER_THREAD and t.is_alive()]


@pytest.mark.parametrize("hook", ["pre_update", "uninstall"])
async def test_a_recall_in_flight_during_an_update_or_uninstall_starts_no_runtime_of_the_old_code(
        a0: A0, server: RunningServer, caplog: pytest.LogCaptureFixture, hook: str) -> None:
    """``pre_update`` and ``uninstall`` stop the runtime and forget every process-wide object, so that the pulled
    (or a later installed) code builds its own. A recall of another agent that was in its pool search at that
    moment goes on with the old modules: it must not start an owner loop and HTTP session of the old code again,
    left running (and kept in the anchor, where the new code finds and uses the old classes' runtime). After an
    uninstall it once did."""
    caplog.set_level(logging.INFO)
    agent = a0.new_agent()
    texts = await seed(a0, agent, ABOVE + BELOW, list(range(20)))
    memory = await a0.Memory.get(agent)
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(query: str) -> None:
        entered.set()
        await release.wait()

    on_pool_search(memory, held)
    in_flight = asyncio.create_task(search_as_recall(a0, agent, memory))
    await entered.wait()
    a0.plugins.call_plugin_hook("a0_reranker", hook)
    assert not owner_threads() and "runtime" not in sys.modules[ANCHOR_MODULE].values  # stopped and forgotten
    release.set()
    found = await in_flight
    assert {d.page_content for d in found} <= set(texts)
    assert "runtime" not in sys.modules[ANCHOR_MODULE].values, "the old code put a runtime back in the anchor"
    assert not owner_threads(), "the old code started an owner loop after pre_update"
    logged = our_log(caplog)  # expected, so one line saying so, not an error with its traceback
    assert "Traceback" not in logged and "ERROR" not in logged, logged
    assert "retired" in logged, logged


@pytest.mark.parametrize("form", ["probe", "probe_async"])
async def test_a_connection_test_of_retired_code_says_so_in_one_line(
        a0: A0, server: RunningServer, caplog: pytest.LogCaptureFixture, form: str) -> None:
    """The status tool of a chat that runs the old code during an update tests the connection: that code starts
    nothing, which is expected, so its report says why and the log has one INFO line, no error or traceback."""
    caplog.set_level(logging.INFO)
    config = RerankerConfig(endpoint=server.url)
    a0.plugins.call_plugin_hook("a0_reranker", "pre_update")
    report = runtime.probe(config) if form == "probe" else await runtime.probe_async(config)
    assert not report.ok and "updated or uninstalled" in report.message, report.message
    assert "unexpected" not in report.message
    assert not owner_threads()
    logged = our_log(caplog)
    assert "Traceback" not in logged and "ERROR" not in logged and "unexpected" not in logged, logged
    assert [r.levelno for r in caplog.records if "retired" in r.getMessage()] == [logging.INFO], logged
