"""A TEI restarted with a smaller ``--max-client-batch-size`` refuses a burst of recalls (422 "batch size N >
maximum allowed batch size M"), request by request: the limit the refusal names caps the route once, with no
detection, and every recall the old route refused is sent again on the capped route."""

from __future__ import annotations

import asyncio

import pytest

from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

QUERY = "rotate the backup key"
RECALLS, DOCS_EACH = 12, 5  # 60 texts: more than one request of the detected 32, each over the new limit
NEW_LIMIT = 8


async def test_a_burst_the_old_batch_limit_split_is_capped_once_without_detection() -> None:
    """The burst's first request is refused and caps the route; the burst's later requests, queued on the old
    route, are refused after that. Each once forgot the new route and detected once more (a detection per refused
    request); they must use the route already capped, and no detection is needed: the refusal names the limit."""
    server = await start_server("tei")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10, breaker_failures=1)
        docs = [[f"{word} note {r}.{i}" for i, word in enumerate(("backup", "rotate", "lunch", "key", "menu"))]
                for r in range(RECALLS)]
        assert (await runtime.rerank_result_async(QUERY, docs[0][:2], config=config)).ranking is not None
        detections, info_gets, sent = runtime.statistics().detections, server.count("/info"), server.count()
        server.protocol.max_client_batch_size = NEW_LIMIT  # type: ignore[attr-defined]  # restarted with 8
        results = await asyncio.gather(*(runtime.rerank_result_async(QUERY, d, config=config) for d in docs))
        assert [r.message for r in results if r.ranking is None] == []
        texts = [len(r.json["texts"]) for r in server.requests[sent:] if r.json and "texts" in r.json]
        refused = [i for i, n in enumerate(texts) if n > NEW_LIMIT]
        assert len(refused) >= 2, texts  # refused request by request
        assert server.count("/info") - info_gets == 0, texts  # no detection: the refusal named the limit
        assert runtime.statistics().detections - detections == 0
        assert max(texts[refused[-1] + 1:]) <= NEW_LIMIT, texts  # after the last refusal, all split to it
    finally:
        await server.close()
