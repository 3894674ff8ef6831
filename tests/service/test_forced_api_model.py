"""A forced ``rerank_api`` on a server named by its host takes the first of its routes that can work with the
settings: Cohere's v2 needs a model id, so without one it is v1 (which ``auto`` picks too), not a route every
request of which the server refuses. Through the real transport to the Cohere protocol server on 127.0.0.1,
standing at the address ``api.cohere.com`` would resolve to."""

from __future__ import annotations

import time
from typing import Any

import pytest

from support.outages import closed_port_url
from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.dialects import ScoreBatch, WireAnswer, WireRequest
from usr.plugins.a0_reranker.core.errors import DetectionFailed, TransportError
from usr.plugins.a0_reranker.service.detection import resolve_route
from usr.plugins.a0_reranker.service.endpoints import HttpTransport

pytestmark = pytest.mark.anyio
KEY = "k" * 20


class AtLocalAddress:
    """The real transport, sending what is meant for the hosted API to the local server instead."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.transport = HttpTransport()

    async def send(self, endpoint: str, request: WireRequest, **options: Any) -> WireAnswer:
        return await self.transport.send(self.url, request, **options)


@pytest.mark.parametrize("api", ["auto", "rerank"])
async def test_cohere_without_a_model_is_spoken_to_on_v1(api: str) -> None:
    server = await start_server("cohere", api_key=KEY)
    transport = AtLocalAddress(server.url)
    try:
        config = RerankerConfig(endpoint="https://api.cohere.com", api=api, api_key=KEY)
        route = await resolve_route(transport, config, time.monotonic() + 5.0)  # type: ignore[arg-type]
        assert route.dialect.path == "/v1/rerank"
        request = route.dialect.build(ScoreBatch.single("capital of France", ["Paris", "bananas"]), route.model)
        answer = await transport.send(route.endpoint, request, deadline=time.monotonic() + 5.0, api_key=KEY)
        assert answer.status == 200, answer.body  # v2 would refuse it: "model is required"
    finally:
        await transport.transport.close()
        await server.close()


async def test_without_a_model_cohere_fails_for_what_v1_met_not_for_the_v2_it_passed_over() -> None:
    """v2 is passed over for want of a model id, and v1 (which needs none) is the route: when v1 fails, that
    is the news. A wrong key said "set rerank_model", and a network that is down was counted a detection
    failure (a server speaking no API we know) rather than ``connect``."""
    server = await start_server("cohere", api_key=KEY)
    refused = AtLocalAddress(closed_port_url())
    wrong_key = AtLocalAddress(server.url)
    try:
        config = RerankerConfig(endpoint="https://api.cohere.com", api_key="wrong-" + KEY)
        with pytest.raises(DetectionFailed, match="HTTP 401: invalid api token"):
            await resolve_route(wrong_key, config, time.monotonic() + 5.0)  # type: ignore[arg-type]
        with pytest.raises(TransportError, match="cannot connect") as caught:
            await resolve_route(refused, config, time.monotonic() + 5.0)  # type: ignore[arg-type]
        assert caught.value.reason == "connect"
    finally:
        await refused.transport.close()
        await wrong_key.transport.close()
        await server.close()
