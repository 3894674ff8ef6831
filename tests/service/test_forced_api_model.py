"""A forced ``rerank_api`` on a server named by its host takes the first of its routes that can work with the
settings: Cohere's v2 needs a model id, so without one it is v1 (which ``auto`` picks too), not a route every
request of which the server refuses."""

from __future__ import annotations

import json
import time

import pytest

from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.dialects import WireAnswer, WireRequest
from usr.plugins.a0_reranker.service.detection import resolve_route

pytestmark = pytest.mark.anyio


class CohereStandIn:
    """Answers as api.cohere.com does: v2 refuses a body without ``model``, v1 takes it."""

    def __init__(self) -> None:
        self.sent: list[WireRequest] = []

    async def send(self, endpoint: str, request: WireRequest, **_: object) -> WireAnswer:
        self.sent.append(request)
        body = request.body or {}
        if request.path == "/v2/rerank" and "model" not in body:
            return WireAnswer(400, b'{"message": "invalid request: model is required"}', "application/json")
        results = [{"index": i, "relevance_score": 0.9 if i < 2 else 0.1} for i in range(len(body["documents"]))]
        return WireAnswer(200, json.dumps({"id": "x", "results": results}).encode(), "application/json")


@pytest.mark.parametrize("api", ["auto", "rerank"])
async def test_cohere_without_a_model_is_spoken_to_on_v1(api: str) -> None:
    config = RerankerConfig(endpoint="https://api.cohere.com", api=api, api_key="k" * 20)
    route = await resolve_route(CohereStandIn(), config, time.monotonic() + 5.0)  # type: ignore[arg-type]
    assert route.dialect.path == "/v1/rerank"
    assert not getattr(route.dialect, "requires_model", False) or route.model
