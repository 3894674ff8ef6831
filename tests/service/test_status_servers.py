"""The status lists the servers of the settings viewed: a replica removed from them leaves the status once
nothing of it is in flight (while a request to it runs, it is listed with it), and its state is kept."""

from __future__ import annotations

import asyncio

import pytest

from support.encoding import encoding_scorer, recall
from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio


def listed(servers: tuple[str, ...]) -> dict[str, int]:
    """Each server the status lists for settings naming ``servers``, with its requests in flight."""
    return {r.url: r.in_flight for r in runtime.statistics(servers).replicas}


async def test_a_removed_replica_is_listed_while_its_request_runs_and_not_after() -> None:
    old, new = await start_server("vllm", scorer=encoding_scorer), await start_server("vllm", scorer=encoding_scorer)
    before = RerankerConfig(endpoint=old.url, api="rerank", timeout=10.0)
    after = before.replace(endpoint=new.url)
    try:
        assert await runtime.rerank_async(*recall(0, 4), config=before) is not None
        old.gate.hold(lambda r: r.method == "POST")
        running = asyncio.ensure_future(runtime.rerank_async(*recall(1, 4), config=before))
        await old.gate.wait_held(1)
        assert await runtime.rerank_async(*recall(2, 4), config=after) is not None  # the settings changed
        assert listed(after.endpoints) == {old.url: 1, new.url: 0}  # its request still runs: listed with it
        old.gate.release()
        assert await running is not None
        assert listed(after.endpoints) == {new.url: 0}  # drained: gone from the status
        assert old.url in {r.url for r in runtime.statistics().replicas}  # no settings named: every server kept
        assert listed(before.endpoints) == {old.url: 0}  # kept: settings naming it again see its figures
        assert runtime.statistics(before.endpoints).replicas[0].pairs == 8
    finally:
        old.gate.release()
        await old.close()
        await new.close()
