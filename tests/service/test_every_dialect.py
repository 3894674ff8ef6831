"""Through the public API, every dialect's loopback server ranks our documents as the server itself does,
in auto mode and in forced mode (issue: core engine, acceptance 2 and 3)."""

from __future__ import annotations

from typing import Any

import pytest

from support.servers import lexical_scorer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

QUERY = "How do I rotate the database backup encryption key?"
DOCS = [
    "The cafeteria menu changes every Tuesday.",
    "Rotate the backup encryption key with the vault CLI, then restart the database backup job.",
    "Database backups run nightly at 02:00.",
    "Encryption keys live in the vault; rotation needs admin rights.",
    "Our office plants need watering twice a week.",
    "To rotate a key: create a new database backup encryption key, re-encrypt, retire the old key.",
]


def expected_order() -> list[int]:
    scores = [lexical_scorer(QUERY, doc) for doc in DOCS]
    return sorted(range(len(DOCS)), key=lambda i: (-scores[i], i))


# kind, server options, extra settings (model for APIs that need one), path we expect to be used
CASES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("cohere", {}, {"model": "rerank-v3.5"}, "/v1/rerank"),
    ("jina", {}, {"model": "jina-reranker-v2-base-multilingual"}, "/v1/rerank"),
    ("voyage", {}, {"model": "rerank-2.5"}, "/v1/rerank"),
    ("mixedbread", {}, {"model": "mixedbread-ai/mxbai-rerank-large-v1"}, "/v1/reranking"),
    ("together", {}, {"model": "Salesforce/Llama-Rank-V1"}, "/v1/rerank"),
    ("xinference", {}, {"model": "bge-reranker-v2-m3"}, "/v1/rerank"),
    ("localai", {}, {"model": "jina-reranker-v1-base-en"}, "/v1/rerank"),
    ("siliconflow", {}, {"model": "BAAI/bge-reranker-v2-m3"}, "/v1/rerank"),
    ("infinity", {}, {}, "/rerank"),
    ("infinity", {"url_prefix": "/v1"}, {}, "/v1/rerank"),
    ("infinity", {"models": ("minilm-l6-ce", "other-ce")}, {"model": "other-ce"}, "/rerank"),
    ("tei", {}, {}, "/rerank"),
    ("vllm", {"error_style": "new"}, {}, "/rerank"),
    ("vllm", {"error_style": "old"}, {}, "/rerank"),
    ("llamacpp", {}, {}, "/v1/rerank"),
    ("sglang", {}, {}, "/v1/rerank"),
]


def ids(case: tuple[str, dict[str, Any], dict[str, Any], str]) -> str:
    return case[0] + "".join(f"-{k}={v}" for k, v in case[1].items())


@pytest.mark.parametrize("api", ["auto", "rerank"])
@pytest.mark.parametrize("case", CASES, ids=ids)
async def test_each_server_ranking_comes_back(case, api: str) -> None:  # type: ignore[no-untyped-def]
    kind, options, settings, path = case
    server = await start_server(kind, **options)
    try:
        config = RerankerConfig(endpoint=server.url, api=api, timeout=5, **settings)
        ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert [index for index, _ in ranking] == expected_order()
        assert sorted(index for index, _ in ranking) == list(range(len(DOCS)))
        scores = [score for _, score in ranking]
        assert scores == sorted(scores, reverse=True)
        assert server.count(path) >= 1
    finally:
        await server.close()


@pytest.mark.parametrize("api", ["auto", "qwen3_score"])
async def test_vllm_serving_qwen3_without_template_ends_in_qwen3_score(api: str) -> None:
    server = await start_server("vllm_qwen3")
    try:
        config = RerankerConfig(endpoint=server.url, api=api, timeout=5)
        ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert [index for index, _ in ranking] == expected_order()
        last = server.requests[-1]
        assert last.path == "/score"
        assert isinstance(last.json["text_1"], str) and last.json["text_1"].startswith("<|im_start|>system\n")
        report = await runtime.probe_async(config)
        assert report.ok and report.api == "qwen3_score" and report.margin is not None and report.margin > 0.3
    finally:
        await server.close()


async def test_forcing_rerank_at_a_qwen3_vllm_gets_the_meaningless_scores_auto_avoids() -> None:
    server = await start_server("vllm_qwen3", untemplated="inverted")
    try:
        forced = RerankerConfig(endpoint=server.url, api="rerank", timeout=5)
        ranking = await reranker.rerank_async(QUERY, DOCS, config=forced)
        assert ranking is not None and [i for i, _ in ranking] != expected_order()
        report = await runtime.probe_async(forced)
        assert not report.ok and "ranks wrongly" in report.message
        auto = await reranker.rerank_async(QUERY, DOCS, config=forced.replace(api="auto"))
        assert auto is not None and [i for i, _ in auto] == expected_order()
    finally:
        await server.close()


async def test_api_key_is_sent_as_bearer_and_a_wrong_key_falls_back() -> None:
    server = await start_server("infinity", api_key="sekret-key-1")
    try:
        good = RerankerConfig(endpoint=server.url, api_key="sekret-key-1", timeout=5)
        assert await reranker.rerank_async(QUERY, DOCS, config=good) is not None
        posts = [r for r in server.requests if r.method == "POST"]
        assert posts and all(r.headers["Authorization"] == "Bearer sekret-key-1" for r in posts)
        bad = good.replace(api_key="wrong-key-2")
        assert await reranker.rerank_async(QUERY, DOCS, config=bad) is None
        assert "wrong-key-2" not in repr(runtime.statistics())
    finally:
        await server.close()


@pytest.mark.parametrize("kind", ["infinity", "tei"])
@pytest.mark.parametrize("key", ["", "wrong-key-3"], ids=["no-key", "wrong-key"])
async def test_a_key_the_server_refuses_is_what_the_fallback_names(kind: str, key: str) -> None:
    """With --api-key, Infinity and TEI hide their GETs behind it, so detection probes every route it knows; the
    ones they lack are 404s (FastAPI's, and TEI's empty one, checked before any key), their rerank route a 401.
    That 401 is the news, whichever route was probed first."""
    server = await start_server(kind, api_key="sekret-key-1")
    try:
        config = RerankerConfig(endpoint=server.url, api_key=key, timeout=5)
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
        assert "HTTP 401" in runtime.statistics().last_error
        report = await runtime.probe_async(config)
        assert not report.ok and "HTTP 401" in report.message
    finally:
        await server.close()


async def test_forced_mode_on_a_known_server_skips_the_probe() -> None:
    server = await start_server("tei")
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=5)
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
        posts = [r for r in server.requests if r.method == "POST"]
        assert len(posts) == 1 and posts[0].json["texts"] == DOCS  # our documents, no probe documents
    finally:
        await server.close()


async def test_ollama_has_no_rerank_api_and_says_so() -> None:
    server = await start_server("ollama")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5)
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
        assert "Ollama" in runtime.statistics().last_error
        report = await runtime.probe_async(config)
        assert not report.ok and "Ollama" in report.message
    finally:
        await server.close()


async def test_xinference_without_a_model_set_uses_the_reranker_it_lists_not_the_first_model() -> None:
    """Xinference serves LLMs, embedding models and rerankers side by side and lists them all, each with its
    ``model_type``; the first listed is whatever was launched first."""
    running = (("qwen2.5-instruct", "LLM"), ("bge-m3", "embedding"))
    server = await start_server("xinference", other_models=running)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5)
        ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert [index for index, _ in ranking] == expected_order()
        assert {r.json["model"] for r in server.requests if r.method == "POST"} == {"bge-reranker-v2-m3"}
    finally:
        await server.close()


async def test_tei_limit_from_info_splits_40_documents_at_32() -> None:
    server = await start_server("tei")
    try:
        docs = [f"document {i} about backup keys" if i % 7 == 0 else f"filler text number {i}" for i in range(40)]
        config = RerankerConfig(endpoint=server.url, timeout=5)
        ranking = await reranker.rerank_async("backup keys", docs, config=config)
        assert ranking is not None
        scores = [lexical_scorer("backup keys", d) for d in docs]
        assert [i for i, _ in ranking] == sorted(range(40), key=lambda i: (-scores[i], i))
        sizes = sorted(len(r.json["texts"]) for r in server.requests if r.path == "/rerank" and r.method == "POST"
                       and len(r.json["texts"]) != 4)  # leave out the 4-document detection probe
        assert sizes == [8, 32]
    finally:
        await server.close()


async def test_the_sync_api_works_from_a_thread_whose_loop_is_running() -> None:
    server = await start_server("vllm")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5)
        import anyio.to_thread

        ranking = await anyio.to_thread.run_sync(lambda: reranker.rerank(QUERY, DOCS, config=config))
        assert ranking is not None and [i for i, _ in ranking] == expected_order()
    finally:
        await server.close()
