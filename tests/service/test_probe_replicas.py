"""The connection test of a replica set (issue 11): every replica probed at once, each on its own route,
a silent one reported as such within the timeout without hiding the others' rows."""

from __future__ import annotations

import asyncio

import pytest

from support.servers import Hang, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio


async def test_the_replicas_are_probed_at_once() -> None:
    servers = [await start_server(kind) for kind in ("infinity", "tei", "vllm_qwen3")]
    try:
        for server in servers:
            server.gate.hold(lambda r: r.method == "POST")
        config = RerankerConfig(endpoint=", ".join(s.url for s in servers), timeout=10)
        task = asyncio.ensure_future(runtime.probe_async(config))
        for server in servers:  # each holds a probe while the others do: none waited for another
            await server.gate.wait_held(1)
        for server in servers:
            server.gate.release()
        report = await task
    finally:
        for server in servers:
            await server.close()
    assert report.ok, report.message
    assert [(r.endpoint, r.server, r.api, r.path) for r in report.replicas] == [
        (servers[0].url, "infinity", "rerank", "/rerank"), (servers[1].url, "tei", "rerank", "/rerank"),
        (servers[2].url, "vllm", "qwen3_score", "/score")]


async def test_a_silent_replica_is_reported_within_the_timeout_with_the_others_rows() -> None:
    good, silent = await start_server("infinity"), await start_server("infinity")
    silent.set_fault(lambda r: Hang())
    try:
        config = RerankerConfig(endpoint=f"{good.url}, {silent.url}", timeout=1.0)
        report = await runtime.probe_async(config)
    finally:
        await good.close()
        await silent.close()
    assert not report.ok and [r.ok for r in report.replicas] == [True, False]
    assert report.replicas[0].margin is not None and report.replicas[0].margin > 0
    assert report.replicas[1].message.startswith("Not working:")
    assert f"failing: replica 2 {silent.url} (not working)" in report.message
