"""Issue 21: a stale keep-alive connection is sent again at once on a fresh one, for every request the
plugin makes: scoring, and detection's GETs and probes too (a route's renewal, Test connection).

The server here closes each kept-alive connection, without answering, as the next request arrives on
it: to the client, exactly a pooled connection that the server had just closed (its keep-alive timeout
ran out). Such a send is not the server's failure; detection used to take it for one (``connect``), so
that three of them in a row, or one with ``breaker_failures: 1``, opened the breaker.
"""

from __future__ import annotations

import pytest

from support.deadlines import PATIENT_S
from support.encoding import encoding_scorer, recall
from support.servers import CloseKeptAlive, RecordedRequest, Respond, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

EVERY_METHOD = ("GET", "POST")
NOT_FOUND = Respond(404, {"detail": "Not Found"})


def assert_resent_and_forgiven(stale: CloseKeptAlive, url: str) -> None:
    """Stale connections were met and sent again (by us; aiohttp itself sends a GET once more on the
    pool, so a closed GET may have been resent before ours), and none was held against the server."""
    stats = runtime.statistics()
    assert stale.closed >= 1, "the test did not reuse a kept-alive connection"
    assert 1 <= stats.stale_connection_retries <= stale.closed, (stats.stale_connection_retries, stale.closed)
    assert stats.breakers[url] == "closed"


async def test_detection_resends_a_stale_connection_and_succeeds() -> None:
    """``rerank_api: auto`` on a cold route: the probes go out on the connections the GETs opened."""
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        stale = CloseKeptAlive(EVERY_METHOD)
        server.set_fault(stale)
        config = RerankerConfig(endpoint=server.url, api="auto", timeout=PATIENT_S, breaker_failures=1)
        ranking = await runtime.rerank_async(*recall(0, 4), config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert runtime.statistics().fallback_total == 0
        assert_resent_and_forgiven(stale, server.url)
    finally:
        await server.close()


async def test_a_renewed_route_is_detected_over_stale_connections() -> None:
    """A 404 says the route no longer holds: the next recall detects again, on the pooled connections."""
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="auto", timeout=PATIENT_S, breaker_failures=1)
        assert await runtime.rerank_async(*recall(0, 4), config=config) is not None  # detected, warm
        stale = CloseKeptAlive(EVERY_METHOD)
        gone = [NOT_FOUND]

        def rule(request: RecordedRequest) -> object:
            return gone.pop() if gone and request.method == "POST" else stale

        server.set_fault(rule)
        assert await runtime.rerank_async(*recall(1, 4), config=config) is None  # the route is forgotten
        detections = server.count("/v1/models")
        ranking = await runtime.rerank_async(*recall(2, 4), config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert server.count("/v1/models") == detections + 1  # detected again
        assert dict(runtime.statistics().fallbacks) == {"http_status": 1}
        assert_resent_and_forgiven(stale, server.url)
    finally:
        await server.close()


async def test_test_connection_resends_a_stale_connection_and_names_the_server() -> None:
    """The identifying GETs go out on pooled connections: each stale one is sent again, so the report
    still names the server (a lost GET made it "rerank-compatible", or the probe failed as ``connect``)."""
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        stale = CloseKeptAlive(EVERY_METHOD)
        server.set_fault(stale)
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=PATIENT_S, breaker_failures=1)
        assert await runtime.rerank_async(*recall(0, 4), config=config) is not None  # its connections kept alive
        closed_before = stale.closed
        report = await runtime.probe_async(config)
        assert report.ok and report.server == "vllm", report
        assert stale.closed > closed_before
        assert_resent_and_forgiven(stale, server.url)
    finally:
        await server.close()
