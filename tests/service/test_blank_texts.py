"""Blank texts (empty or whitespace only) never cost another recall its ranking. SGLang refuses a request with
one blank document or a blank query (400), and the batcher puts the recalls of several agents that share a
query into one request: a blank memory must not reach the wire, and a blank query is not reranked. Nor may text
no server can encode: a lone surrogate (from bytes decoded with ``surrogateescape``, a ``"\\ud800"`` escape)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from support.servers import RunningServer, lexical_scorer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

QUERY = "rotate backup keys"


async def in_one_request(server: RunningServer, config: RerankerConfig, *documents: list[str]) -> list[Any]:
    """The rankings of recalls of ``QUERY`` over each of ``documents``, sent in one shared request: held behind
    another recall's request at the server's gate until both have joined it."""
    assert await runtime.rerank_async("warm up", ["a", "b"], config=config) is not None
    server.reset()
    server.gate.hold()
    first = asyncio.create_task(runtime.rerank_async("other question", ["x", "y"], config=config))
    await server.gate.wait_held(1)
    recalls = [asyncio.create_task(runtime.rerank_async(QUERY, docs, config=config)) for docs in documents]
    await server.gate.wait_held(2)  # the recalls' shared request reached the server
    server.gate.release()
    assert await first is not None
    return list(await asyncio.gather(*recalls))


async def test_a_blank_memory_costs_no_recall_sharing_its_request_the_ranking() -> None:
    server = await start_server("sglang")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10)
        clean = ["cafeteria menu", "keys for the backup vault"]
        blank = [" \n\t", "backup keys rotate", "", "cafeteria menu"]
        clean_ranking, blank_ranking = await in_one_request(server, config, clean, blank)
        assert clean_ranking is not None and blank_ranking is not None, runtime.statistics().last_error
        assert [i for i, _ in clean_ranking] == [1, 0]
        assert [i for i, _ in blank_ranking] == [1, 3, 0, 2]  # the blank memories last, in their stock order
        assert [score for _, score in blank_ranking[2:]] == [-math.inf, -math.inf]
        assert blank_ranking[0][1] == lexical_scorer(QUERY, blank[1])
        shared = [r.json["documents"] for r in server.requests if r.json and r.json.get("query") == QUERY]
        assert shared == [["cafeteria menu", "keys for the backup vault", "backup keys rotate"]]  # one request
        assert runtime.statistics().fallback_total == 0
    finally:
        await server.close()


async def test_a_memory_blank_within_its_cut_is_not_sent_either() -> None:
    server = await start_server("sglang")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10, max_doc_chars=16)
        ranking = await runtime.rerank_async(QUERY, [" " * 16 + "backup keys", "backup keys"], config=config)
        assert ranking == [(1, lexical_scorer(QUERY, "backup keys")), (0, -math.inf)], runtime.statistics().last_error
    finally:
        await server.close()


async def test_a_lone_surrogate_costs_no_recall_sharing_its_request_the_ranking() -> None:
    """No server can encode it (UTF-8 has no lone surrogates): sent, it failed the whole shared request."""
    server = await start_server("tei")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10)
        clean, odd = await in_one_request(server, config, ["cafeteria menu", "keys for the backup vault"],
                                          ["backup keys rotate \udcff", "cafeteria"])
        assert clean is not None and odd is not None, runtime.statistics().last_error
        assert [i for i, _ in clean] == [1, 0] and [i for i, _ in odd] == [0, 1]
        shared = [r.json["texts"] for r in server.requests if r.json and r.json.get("query") == QUERY]
        assert shared == [["cafeteria menu", "keys for the backup vault", "backup keys rotate \ufffd", "cafeteria"]]
        assert await runtime.rerank_async(QUERY + " \ud800", ["backup keys", "menu"], config=config) is not None
        assert server.requests[-1].json["query"] == QUERY + " \ufffd"
    finally:
        server.gate.release()
        await server.close()


@pytest.mark.parametrize("query", ["", " \n "])
async def test_a_blank_query_is_not_reranked_and_nothing_is_sent(query: str) -> None:
    server = await start_server("sglang")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10)
        assert await runtime.rerank_async("warm up", ["a", "b"], config=config) is not None
        server.reset()
        assert await runtime.rerank_async(query, ["backup keys", "cafeteria menu"], config=config) is None
        assert server.count() == 0
        stats = runtime.statistics()
        assert dict(stats.fallbacks) == {"bad_input": 1}
        assert "blank" in stats.last_error
    finally:
        await server.close()


async def test_no_documents_is_an_empty_ranking_that_leaves_the_status_as_it_was() -> None:
    """A plugin's call with nothing to rank sends nothing and is no rerank: the status keeps the API last used
    and the latency of real ones (it showed "Last API used: -" and a 0 ms median after such calls)."""
    server = await start_server("tei")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10)
        assert await runtime.rerank_async(QUERY, ["backup keys", "cafeteria menu"], config=config) is not None
        before, sent = runtime.statistics(), server.count()
        assert await runtime.rerank_async(QUERY, [], config=config) == []
        assert await asyncio.to_thread(runtime.rerank, QUERY, (), config=config) == []
        after = runtime.statistics()
        assert server.count() == sent and after.last_api == before.last_api == "rerank"
        assert (after.reranks, after.reranked, after.latency_p50_ms) == (1, 1, before.latency_p50_ms)
    finally:
        await server.close()
