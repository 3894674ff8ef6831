"""A TEI restarted with a smaller ``--max-client-batch-size`` refuses a burst of recalls (422 "batch size N >
maximum allowed batch size M"), request by request: the route is detected again once, and every recall the
old route refused waits for, then uses, that one detection."""

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


async def test_a_burst_the_old_batch_limit_split_is_detected_again_once() -> None:
    """The burst's first request is refused and its recalls detect again; the burst's later requests, queued on
    the old route, are refused after that detection ended. Each forgot the new route and detected once more
    (a detection per refused request); they must use the route already detected again."""
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
        assert len([n for n in texts if n > NEW_LIMIT]) >= 2, texts  # refused request by request
        assert server.count("/info") - info_gets == 1, texts  # detected again once, not once per refusal
        assert runtime.statistics().detections - detections == 1
    finally:
        await server.close()
