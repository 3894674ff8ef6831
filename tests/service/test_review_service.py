"""Review findings in ``service/``: each test shows one bug through real parts, sequenced by gates and events."""

from __future__ import annotations

import asyncio
import time

import pytest

from support.encoding import encoding_scorer, recall
from support.servers import start_server
from usr.plugins.a0_reranker.core import detection as det
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.statistics import StatsRecorder
from usr.plugins.a0_reranker.service.reranker_service import RerankService

pytestmark = pytest.mark.anyio


def _detections() -> set[asyncio.Task[object]]:
    return {t for t in asyncio.all_tasks() if "_detect_uncached" in repr(t.get_coro()) and not t.done()}


async def test_closing_the_service_stops_a_detection_whose_route_was_forgotten() -> None:
    """A failed Test connection forgets the route while a recall's detection still runs; the service is then
    closed (shutdown, uninstall, pre_update). That detection must stop with it: left running, it goes on after
    the transport closed, opens a fresh HTTP session that nothing ever closes and sends requests from a
    service that was shut down."""
    service = RerankService(StatsRecorder())
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=30.0)  # api auto: identifying GETs first
        server.gate.hold(lambda r: r.method == "GET")
        caller = asyncio.create_task(service.rerank(*recall(1, 4), config, time.monotonic() + 30.0))
        await server.gate.wait_held(len(det.IDENTIFYING_GETS))  # the recall's detection is under way
        report = await service.probe(config, time.monotonic())  # no time left: fails, and forgets the route
        assert not report.ok
        caller.cancel()  # what stop() does first to the work still running (cancel_running)
        with pytest.raises(asyncio.CancelledError):
            await caller
        running = _detections()
        assert running  # the detection runs on: its callers leaving does not stop it (by design)
        sent = server.count()
        await service.close()
        server.gate.release()
        await asyncio.wait(running, timeout=10.0)  # bounded: a leaked detection ends by its own deadline
        assert all(t.done() for t in running)
        assert server.count() == sent, "a detection kept sending requests after the service was closed"
        assert all(t.cancelled() for t in running), "close() left a detection running"
    finally:
        server.gate.release()
        await server.close()
