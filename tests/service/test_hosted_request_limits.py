"""A hosted API's required fields and per-request limits. Voyage needs ``model``: without one the recall says to
set rerank_model, before any request. Its limits hold for a large recall of long memories. Voyage caps "query tokens × documents
+ all document tokens" at 600K (300K for rerank-1 and rerank-lite-1) whatever ``truncation`` says
(docs.voyageai.com/reference/reranker-api): 512 memories of 5,000 characters with a 1,000-character query are about
768K tokens, and the whole recall fell back. The Voyage stand-in is reached at its own host name through a forward
proxy that resolves it to 127.0.0.1, so the plugin speaks Voyage's dialect as it does to the real API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from support.forward_proxy import ForwardProxy
from support.servers import RunningServer, start_server
from support.servers.hosted_app import tokens_used
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio
KEY = "pa-voyage-test-key-0123456789"
QUERY = "how do I rotate the backup encryption key " * 23  # 966 characters, within the default cut
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture
async def voyage(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningServer]:
    """The Voyage stand-in, at ``http://api.voyageai.com`` for the plugin (through the proxy's host table)."""
    server = await start_server("voyage", api_key=KEY)
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    proxy = await ForwardProxy(hosts={"api.voyageai.com": (parts.hostname, parts.port)}).start()
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    yield server
    await proxy.close()
    await server.close()


def sent(server: RunningServer) -> list[int]:
    """The documents of each recall request that reached the server (not detection's probe)."""
    return [len(r.json["documents"]) for r in server.requests if r.json and r.json["query"] == QUERY]


RELEVANT = 450  # in a late part of the first request (512 pairs): its score must come back to it


def memories(count: int, chars: int) -> list[str]:
    topic = {RELEVANT: "how to rotate the backup encryption key"}
    return [f"memory {i}: {topic.get(i, 'the cafeteria menu changes')}. " + "x" * (chars - 60) for i in range(count)]


# aiohttp notes every request body over 1 MiB with a ResourceWarning
@pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")
@pytest.mark.parametrize("model", ["rerank-2.5", "rerank-1"])
async def test_a_large_recall_of_long_memories_stays_under_voyage_s_token_cap(voyage: RunningServer,
                                                                                model: str) -> None:
    docs = memories(600, 5000)
    config = RerankerConfig(endpoint="http://api.voyageai.com", model=model, api_key=KEY, timeout=30)
    counted = runtime.statistics().http_requests
    ranking = await reranker.rerank_async(QUERY, docs, config=config)
    assert ranking is not None, runtime.statistics().last_error
    assert runtime.statistics().http_requests - counted == len(sent(voyage)) > 1  # each part is a request counted
    assert sorted(index for index, _ in ranking) == list(range(600)) and ranking[0][0] == RELEVANT
    cap = 300_000 if model == "rerank-1" else 600_000
    requests = [r.json for r in voyage.requests if r.method == "POST" and r.json]
    assert all(tokens_used(body["query"], body["documents"]) <= cap for body in requests)
    assert sum(sent(voyage)) == 600


async def test_an_ordinary_recall_is_still_one_request(voyage: RunningServer) -> None:
    """The cap is met by splitting only what would pass it: 100 memories of 500 characters are one request."""
    config = RerankerConfig(endpoint="http://api.voyageai.com", model="rerank-2.5", api_key=KEY, timeout=10)
    ranking = await reranker.rerank_async(QUERY, memories(100, 500), config=config)
    assert ranking is not None, runtime.statistics().last_error
    assert sent(voyage) == [100]


@pytest.mark.parametrize("api", ["auto", "rerank"])
async def test_voyage_without_a_model_is_a_settings_problem_named_before_any_request(voyage: RunningServer,
                                                                                      api: str) -> None:
    """Voyage's reference marks ``model`` required: a request without one is refused with a 400 whose wording no
    reference gives. The plugin says which setting is missing and sends nothing, whether the API is forced or not."""
    config = RerankerConfig(endpoint="http://api.voyageai.com/v1/rerank", api_key=KEY, timeout=10, api=api)
    ranking = await reranker.rerank_async(QUERY, memories(3, 100), config=config)
    assert ranking is None
    statistics = runtime.statistics()
    assert dict(statistics.fallbacks) == {"config": 1} and "rerank_model" in statistics.last_error
    assert [r for r in voyage.requests if r.method == "POST"] == []
