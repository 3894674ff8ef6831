"""Detections at the edges: one forgotten while running stops with the service, and one with no time to send
anything says nothing of the server. Sequenced by gates and events."""

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
        caller.cancel()  # what stop() does first to the work still running
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


async def test_detections_that_had_no_time_to_send_anything_leave_a_healthy_servers_breaker_closed() -> None:
    """The route of a healthy, warm server is detected again (its TTL ran out, or a failed Test connection
    forgot it) by recalls whose pool search used up their time. Those detections send nothing; their
    timeouts say nothing of the server (failure-behaviour.md: a timeout does not count when its request had
    less than twice the time the server is seen to need). Yet each counted as the server being down, and
    three opened the breaker: every recall then skipped a server that was fine."""
    service = RerankService(StatsRecorder())
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5.0)
        assert (await service.rerank(*recall(0, 4), config, time.monotonic() + 5.0)).ranking is not None
        assert not (await service.probe(config, time.monotonic())).ok  # the route is forgotten
        sent = server.count()
        for q in range(1, 4):
            result = await service.rerank(*recall(q, 4), config, time.monotonic())  # no time left
            assert result.ranking is None and result.reason == "timeout"
        assert server.count() == sent  # nothing reached the server
        assert service.live_state()["breakers"] == {server.url: "closed"}
    finally:
        await service.close()
        await server.close()
