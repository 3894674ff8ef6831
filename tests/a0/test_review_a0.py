"""Review findings in ``a0_hooks/``: each test shows one bug through the A0 stand-in and real servers."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from support.servers import RunningServer, start_server
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0, MEM_FILTER, prio_scorer
from .test_recall_pool import A0_THRESHOLD, ABOVE, BELOW, MESSAGE, seed

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
    original = memory.db.asearch

    async def failing_when_widened(query: str, search_type: str, **kwargs: Any) -> Any:
        if kwargs.get("k") == 20:
            raise RuntimeError(f"the store refused {query!r} next to {texts[0]!r}")
        return await original(query, search_type, **kwargs)

    memory.db.asearch = failing_when_widened
    a0.ours("a0_hooks.recall_entry").begin(agent, "recall")
    found = await memory.search_similarity_threshold(query=MESSAGE, limit=12, threshold=A0_THRESHOLD,
                                                     filter=MEM_FILTER)
    assert [d.page_content for d in found] == texts[:6]  # A0's answer
    last_error = runtime.statistics().last_error
    assert "the store refused" in last_error and MESSAGE not in last_error  # the kept message is masked
    logged = our_log(caplog)
    assert "the pool search failed" in logged
    assert MESSAGE not in logged and texts[0] not in logged, logged
