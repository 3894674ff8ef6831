"""Settings changed while the reranker runs (long-run lens): what a server told us about itself outlives a
change of our own settings for it. A Retry-After is the server's word and an open breaker its health, both
per server and key: changing ``rerank_max_concurrency`` (or the breaker's settings) must not send a
request the server asked us not to send, nor to a server known to be down. Sequenced by the server's
recorded requests and the counters.
"""

from __future__ import annotations

from typing import Any

import pytest

from support.deadlines import PATIENT_S
from support.encoding import encoding_scorer, recall
from support.servers import RecordedRequest, Respond, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

HOUR_429 = Respond(429, {"error": {"message": "Rate limit exceeded", "type": "RateLimitError", "param": None,
                                   "code": 429}}, headers={"Retry-After": "3600"})


def posts(server: RunningServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.method == "POST"]


async def detected(**settings: Any) -> tuple[RunningServer, RerankerConfig]:
    server = await start_server("vllm", scorer=encoding_scorer)
    config = RerankerConfig(endpoint=server.url, api="rerank", timeout=PATIENT_S, max_concurrency=4, **settings)
    assert await runtime.rerank_async(*recall(0, 4), config=config) is not None
    return server, config


@pytest.mark.parametrize("change", [{"max_concurrency": 2}, {"breaker_failures": 5}, {"breaker_cooldown": 30.0}])
async def test_a_retry_after_holds_across_a_change_of_settings(change: dict[str, Any]) -> None:
    """An hour's Retry-After, then the user changes a setting: recalls fall back at once, none is sent."""
    server, config = await detected()
    try:
        server.set_fault(lambda r: HOUR_429 if r.method == "POST" else None)
        assert await runtime.rerank_async(*recall(1, 4), config=config) is None
        sent = len(posts(server))
        changed = config.replace(**change)
        for q in range(2, 5):
            assert await runtime.rerank_async(*recall(q, 4), config=changed) is None
        assert len(posts(server)) == sent  # the hour asked for is kept whatever our settings say
        assert runtime.statistics().fallbacks == {"rate_limited": 4}
    finally:
        await server.close()


@pytest.mark.parametrize("change", [{"max_concurrency": 2}, {"breaker_failures": 5}])
async def test_an_open_breaker_stays_open_across_a_change_of_settings(change: dict[str, Any]) -> None:
    """The server goes away (connections refused, 3 in a row open the breaker for an hour); a changed setting
    does not reopen the way to it before the cooldown: the next recalls are refused by the breaker, without
    trying to connect (each would otherwise pay a connection attempt, or a whole timeout on a silent host)."""
    server, config = await detected(max_retries=0, breaker_cooldown=3600.0)
    await server.close()
    for q in range(1, 4):
        assert await runtime.rerank_async(*recall(q, 4), config=config) is None
    assert runtime.statistics().breakers[server.url] == "open"
    for q in range(4, 7):
        assert await runtime.rerank_async(*recall(q, 4), config=config.replace(**change)) is None
    assert runtime.statistics().fallbacks == {"connect": 3, "breaker_open": 3}
