"""A hosted API that refuses the key (a typo, a revoked key: 401, Cohere's 498) or the account behind it (402: no
credit left). The recall says so, counted as the refusal it is (``http_status``), not as ``detection``, whose
advice is to check the model; the key is not hammered (the breaker opens after three refusals, as for any
detection that fails); and once the breaker is open the status still shows why, as the README promises."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from support.forward_proxy import ForwardProxy
from support.servers import Respond, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

pytestmark = pytest.mark.anyio
KEY = "co-right-key-0123456789"
POOL = ["Paris is the capital of France.", "Bananas are rich in potassium.", "The Nile is a river."]


@pytest.fixture
async def cohere() -> AsyncIterator[RunningServer]:
    server = await start_server("cohere", api_key=KEY, invalid_token_status=498)
    yield server
    await server.close()


async def recall(config: RerankerConfig) -> tuple[str, str]:
    outcome = await rerank_pool("capital of France", POOL, limit=2, config=config, text_of=str)
    assert not outcome.applied
    return outcome.reason, outcome.message


async def test_a_wrong_key_is_named_as_such_and_not_hammered(cohere: RunningServer) -> None:
    config = RerankerConfig(endpoint=cohere.url, api_key="co-wrong-key-0123456789", model="rerank-v3.5", timeout=5,
                            breaker_cooldown=3600)  # no probe of the breaker's comes due during the test
    reason, message = await recall(config)
    assert reason == "http_status"
    assert "API key" in message and "498" in message and "invalid api token" in message
    for _ in range(2):
        await recall(config)
    sent = cohere.count()
    for _ in range(7):
        await recall(config)
    statistics = runtime.statistics()
    assert statistics.fallbacks["http_status"] == 3 and statistics.fallbacks["breaker_open"] == 7
    assert cohere.count() == sent  # three refusals, then nothing more is sent with that key


async def test_once_the_breaker_is_open_the_status_still_shows_why(cohere: RunningServer) -> None:
    config = RerankerConfig(endpoint=cohere.url, api_key="co-other-wrong-key-01234", model="rerank-v3.5", timeout=5)
    while (await recall(config))[0] != "breaker_open":
        pass
    assert "invalid api token" in runtime.statistics().last_error  # why it opened, not only that it did


async def test_an_account_without_credit_says_so(cohere: RunningServer) -> None:
    cohere.set_fault(Respond(402))  # an empty 402: the status's own meaning is all there is
    config = RerankerConfig(endpoint=cohere.url, api_key=KEY, model="rerank-v3.5", timeout=5)
    reason, message = await recall(config)
    assert reason == "http_status"
    assert "402" in message and "credit" in message


@pytest.mark.parametrize(("kind", "host"), [("together", "api.together.xyz"), ("siliconflow", "api.siliconflow.cn")])
async def test_a_hosted_api_known_by_name_is_asked_on_its_own_route_only(monkeypatch: pytest.MonkeyPatch, kind: str,
                                                                          host: str) -> None:
    """Together and SiliconFlow serve ``/v1/rerank`` alone: with a wrong key, each detection asked four routes
    they do not have on top of it. Reached at their own names through a proxy that resolves them locally."""
    server = await start_server(kind, api_key=KEY)
    address = urlsplit(server.url)
    proxy = await ForwardProxy(hosts={host: (address.hostname or "", address.port or 0)}).start()
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    try:
        config = RerankerConfig(endpoint=f"http://{host}", api_key="wrong-key-0123456789", model="m", timeout=5,
                                breaker_cooldown=3600)
        for _ in range(4):
            await recall(config)
        assert [r.path for r in server.requests] == ["/v1/rerank"] * 3  # one a detection, then the breaker
        assert runtime.statistics().fallbacks["http_status"] == 3
        outcome = await rerank_pool("capital of France", POOL, limit=2, config=config.replace(api_key=KEY),
                                    text_of=str)
        assert outcome.applied and outcome.documents[0] == POOL[0], outcome.message
    finally:
        await proxy.close()
        await server.close()


@pytest.mark.parametrize("api", ["auto", "rerank"])
async def test_llamacpp_a_wrong_key_opens_the_breaker_after_three_refusals(api: str) -> None:
    """llama.cpp's model listing is public, so a forced API is found without the key: its probe's refusal used to
    leave the route standing, a refused recall forgot it, and the detection after it (counted a success) broke
    the streak: the breaker opened only by the failure rate, after 10 refusals."""
    server = await start_server("llamacpp", api_key=KEY)
    try:
        config = RerankerConfig(endpoint=server.url, api_key=f"wrong-key-{api}-0123456789", timeout=5, api=api,
                                breaker_cooldown=3600)
        reasons_and_messages = [await recall(config) for _ in range(12)]
        assert "API key was refused" in reasons_and_messages[0][1], reasons_and_messages[0]
        statistics = runtime.statistics()
        assert statistics.fallbacks["http_status"] == 3 and statistics.fallbacks["breaker_open"] == 9, (
            statistics.fallbacks, [r.path for r in server.requests if r.method == "POST"])
    finally:
        await server.close()


@pytest.mark.parametrize("api", ["auto", "rerank"])
async def test_cohere_known_by_name_a_wrong_key_opens_the_breaker_after_three_refusals(
        monkeypatch: pytest.MonkeyPatch, cohere: RunningServer, api: str) -> None:
    """With the API forced, Cohere (known by its name) is detected without a request: such a detection says nothing
    of the server, and no longer breaks the streak of the recalls' refusals."""
    address = urlsplit(cohere.url)
    proxy = await ForwardProxy(hosts={"api.cohere.com": (address.hostname or "", address.port or 0)}).start()
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    try:
        config = RerankerConfig(endpoint="http://api.cohere.com", api_key=f"wrong-key-{api}-0123456789",
                                model="rerank-v3.5", timeout=5, api=api, breaker_cooldown=3600)
        for _ in range(12):
            await recall(config)
        statistics = runtime.statistics()
        assert statistics.fallbacks["http_status"] == 3 and statistics.fallbacks["breaker_open"] == 9, (
            statistics.fallbacks, [r.path for r in cohere.requests])
        assert cohere.count() == (3 if api == "rerank" else 6)  # auto: each detection asks v2, then v1
    finally:
        await proxy.close()
