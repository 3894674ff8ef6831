"""A LiteLLM proxy as the endpoint (issue 14, acceptance 3): through the public API, detection finds its
Cohere-compatible route and ranks as the reranker behind it does, in auto and in forced mode, with
the proxy's master key; a wrong key or model falls back, names the proxy's reason and leaks no key."""

from __future__ import annotations

from typing import Any

import pytest

from support.servers import RecordedRequest, Respond, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime

from .test_every_dialect import DOCS, QUERY, expected_order

pytestmark = pytest.mark.anyio

MASTER_KEY = "sk-litellm-master-9c2e7a"
MODEL = "team-reranker"  # a model_name of the proxy's config, not the provider's model id


@pytest.fixture
async def proxy() -> Any:
    server = await start_server("litellm", api_key=MASTER_KEY, models=(MODEL,))
    yield server
    await server.close()


def posts(server: RunningServer) -> list[Any]:
    return [r for r in server.requests if r.method == "POST"]


@pytest.mark.parametrize("base", ["", "/v1"], ids=["root", "v1-base-url"])
@pytest.mark.parametrize("api", ["auto", "rerank"])
async def test_detected_through_the_proxy_and_ranked_as_the_reranker_ranks(
        proxy: RunningServer, api: str, base: str) -> None:
    config = RerankerConfig(endpoint=proxy.url + base, api=api, model=MODEL, api_key=MASTER_KEY, timeout=5)
    ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
    assert ranking is not None, runtime.statistics().last_error
    assert [index for index, _ in ranking] == expected_order()
    scores = [score for _, score in ranking]
    assert scores == sorted(scores, reverse=True)
    ours = [r for r in posts(proxy) if r.json.get("documents") == DOCS]
    assert ours and {r.path for r in ours} <= {"/v1/rerank", "/rerank"}
    assert all(r.json["model"] == MODEL and r.headers["Authorization"] == f"Bearer {MASTER_KEY}" for r in ours)
    report = await runtime.probe_async(config)
    assert report.ok and report.api == "rerank" and report.model == MODEL, report.message
    assert report.margin is not None and report.margin > 0.3


async def test_without_a_model_the_proxys_listed_model_is_used(proxy: RunningServer) -> None:
    config = RerankerConfig(endpoint=proxy.url, api_key=MASTER_KEY, timeout=5)
    ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
    assert ranking is not None and [i for i, _ in ranking] == expected_order(), runtime.statistics().last_error
    assert {"/v1/models", "/models"} & {r.path for r in proxy.requests if r.method == "GET"}
    assert {r.json["model"] for r in posts(proxy)} == {MODEL}


@pytest.mark.parametrize("api", ["auto", "rerank"])
async def test_a_model_the_proxy_does_not_serve_falls_back_with_its_reason(proxy: RunningServer, api: str) -> None:
    config = RerankerConfig(endpoint=proxy.url, api=api, model="rerank-v3.5", api_key=MASTER_KEY, timeout=5)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    assert "Invalid model name passed in model=rerank-v3.5" in runtime.statistics().last_error
    report = await runtime.probe_async(config)
    assert not report.ok and "Invalid model name" in report.message


async def test_a_wrong_key_falls_back_and_says_what_the_proxy_said(proxy: RunningServer) -> None:
    config = RerankerConfig(endpoint=proxy.url, model=MODEL, api_key="sk-wrong-0f0f0f", timeout=5)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    stats = runtime.statistics()
    assert "No connected db." in stats.last_error and "sk-wrong-0f0f0f" not in repr(stats)
    assert await reranker.rerank_async(QUERY, DOCS, config=config.replace(api_key=MASTER_KEY)) is not None


async def test_an_older_proxy_echoing_the_wrong_key_is_masked() -> None:
    server = await start_server("litellm", api_key=MASTER_KEY, models=(MODEL,), auth_style="legacy")
    try:
        config = RerankerConfig(endpoint=server.url, model=MODEL, api_key="wrong-key-echoed-77", timeout=5)
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
        report = await runtime.probe_async(config)
        stats = runtime.statistics()
        assert "LiteLLM Virtual Key expected. Received=***," in stats.last_error  # the proxy's echo, masked
        assert "wrong-key-echoed-77" not in repr(stats) and "wrong-key-echoed-77" not in repr(report)
    finally:
        await server.close()


async def test_a_proxy_that_rate_limits_detection_is_waited_for_not_taken_for_dead(proxy: RunningServer) -> None:
    """A proxy over its rate limit answers 429 with a Retry-After on its rerank routes (LiteLLM's limiter runs in
    the routes' auth dependency, so a route it does not have stays a 404). The route the probe would have found is
    among those held back: detection waits the Retry-After out like any request, it does not probe every other
    route meanwhile, nor count the server as down (failure-behaviour.md, "429 and Retry-After")."""
    limit = {"message": "LiteLLM Rate Limit Handler for rate limit type = key. Crossed TPM / RPM / Max Parallel "
                        "Request Limit.", "type": "throttling_error", "param": "None", "code": "429"}
    rerank_routes = {"/rerank", "/v1/rerank", "/v2/rerank"}

    def over_the_limit(request: RecordedRequest) -> Respond | None:
        limited = request.method == "POST" and request.path in rerank_routes
        return Respond(429, {"error": limit}, headers={"Retry-After": "30"}) if limited else None

    proxy.set_fault(over_the_limit)
    config = RerankerConfig(endpoint=proxy.url, model=MODEL, api_key=MASTER_KEY, timeout=5, breaker_failures=1)
    for _ in range(3):
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    stats = runtime.statistics()
    assert stats.fallbacks == {"rate_limited": 3}, stats.last_error
    assert stats.breakers[proxy.url] == "closed"
    assert len([r for r in posts(proxy) if r.path in rerank_routes]) == 1
