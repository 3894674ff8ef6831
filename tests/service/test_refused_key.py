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
