"""A0's default recall query is the user's message plus up to 10,000 characters of history; common
cross-encoders take ~512 tokens and vLLM (400) or llama.cpp (500) refuse longer input. With default
settings reranking still works (issue: core engine, acceptance 5)."""

from __future__ import annotations

import pytest

from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

USER_MESSAGE = "What changed in the March upgrade of the billing service?"
HISTORY = " ".join(f"lorem{i % 97} ipsum{i % 89}" for i in range(1200))[:10_000]
QUERY = USER_MESSAGE + "\n\n" + HISTORY
DOCS = [
    "Connectivity incident: Agent Zero lost network access in March.",
    "Upgrade notes: the March upgrade of the billing service moved invoices to the new ledger.",
    "The office moved to the third floor.",
]


def posts(server, path: str) -> list:  # type: ignore[no-untyped-def]
    return [r for r in server.requests if r.method == "POST" and r.path == path]


@pytest.mark.parametrize(("kind", "path"), [("vllm", "/rerank"), ("llamacpp", "/v1/rerank")])
async def test_a_10000_character_query_is_cut_to_its_head_and_ranks_correctly(kind: str, path: str) -> None:
    assert len(QUERY) > 10_000
    server = await start_server(kind)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5)
        ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert ranking[0][0] == 1
        sent = posts(server, path)[-1].json
        assert sent["query"] == QUERY[: config.max_query_chars]
        assert sent["query"].startswith(USER_MESSAGE)
        assert runtime.statistics().fallback_total == 0
    finally:
        await server.close()


@pytest.mark.parametrize(("kind", "path", "options"), [
    ("vllm", "/rerank", {}), ("llamacpp", "/v1/rerank", {}),
    ("sglang", "/v1/rerank", {"context_length": 512}),  # bge-reranker-base's 512 tokens
])
async def test_a_server_that_says_too_long_gets_one_retry_with_tighter_cuts(kind: str, path: str,
                                                                           options: dict[str, int]) -> None:
    long_doc = "Upgrade notes: the March upgrade of the billing service. " + "details " * 1000
    docs = [DOCS[0], long_doc, DOCS[2]]
    server = await start_server(kind, **options)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5)
        ranking = await reranker.rerank_async(QUERY, docs, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert ranking[0][0] == 1
        first, retry = [r.json for r in posts(server, path) if r.json.get("query", "").startswith(USER_MESSAGE)]
        assert len(first["documents"][1]) == len(long_doc[: config.max_doc_chars])
        assert len(retry["query"]) == 500 and max(len(d) for d in retry["documents"]) == 1200
    finally:
        await server.close()


async def test_a_qwen3_server_with_a_long_context_needs_no_retry() -> None:
    server = await start_server("vllm_qwen3")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5)
        ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
        assert ranking is not None and ranking[0][0] == 1
        assert len([r for r in posts(server, "/score") if USER_MESSAGE in str(r.json)]) == 1
    finally:
        await server.close()


# aiohttp notes every request body over 1 MiB with a ResourceWarning (400 memories are 19 MB as escaped JSON)
@pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")
async def test_a_batch_of_long_non_ascii_memories_is_not_echoed_back_past_the_answer_cap() -> None:
    """SGLang echoes every document in its answer unless told not to (``return_documents`` defaults to true):
    400 memories of 8,000 CJK characters (the default cut) come back as about 9.6 MB of UTF-8, past the 8 MiB
    an answer may have, and the rerank fell back as malformed. Only the scores are needed."""
    docs = [f"{i} " + "记忆内容" * 2000 for i in range(400)]
    server = await start_server("sglang")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=30)
        ranking = await reranker.rerank_async("记忆", docs, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert sorted(index for index, _ in ranking) == list(range(400))
    finally:
        await server.close()
