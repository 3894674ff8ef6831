"""Integration tier: a real Infinity server (infinity-emb) serving a tiny cross-encoder built locally.

These tests pin down the server facts our client relies on (Infinity's routes, bodies and errors as infinity-emb 0.0.78 serves them) by talking to
Infinity with plain urllib. The client-level checks wait at the end of the file for the client library.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from integration import infinity_model as im
from integration.infinity_server import (
    SERVED_MODEL_NAME,
    InfinityServer,
    run_infinity,
)

pytestmark = pytest.mark.integration

API_KEY = "a0r-integration-key"
PROBE_MARGIN = 0.5  # what we expect the probe pair to separate by, in sigmoid scores


# ------------------------------------------------------------------------------------------------
# fixtures (the interpreter and the tiny model are in conftest.py)


@pytest.fixture(scope="module")
def infinity(
    infinity_python: str, tiny_model: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InfinityServer]:
    """Infinity with its defaults: no URL prefix, no API key."""
    with run_infinity(infinity_python, tiny_model[0], workdir=tmp_path_factory.mktemp("infinity")) as server:
        yield server


@pytest.fixture(scope="module")
def infinity_v1_keyed(
    infinity_python: str, tiny_model: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InfinityServer]:
    """Infinity started with ``--url-prefix /v1 --api-key ...``."""
    with run_infinity(
        infinity_python,
        tiny_model[0],
        url_prefix="/v1",
        api_key=API_KEY,
        workdir=tmp_path_factory.mktemp("infinity-v1"),
    ) as server:
        yield server


# ------------------------------------------------------------------------------------------------
# plain HTTP


def http(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        with err:
            status, raw = err.code, err.read()
    return status, json.loads(raw) if raw else None


def rerank(server: InfinityServer, query: str, documents: list[str], **extra: Any) -> dict[str, Any]:
    body = {"model": server.model_name, "query": query, "documents": documents, **extra}
    status, payload = http("POST", f"{server.base_url}/rerank", body, server.headers())
    assert status == 200, payload
    assert isinstance(payload, dict)
    return payload


# ------------------------------------------------------------------------------------------------
# the server itself


def test_health_answers_unix_time(infinity: InfinityServer) -> None:
    status, payload = http("GET", f"{infinity.root_url}/health")
    assert status == 200
    assert isinstance(payload["unix"], float)


def test_rerank_has_infinity_shape_sorted_best_first(infinity: InfinityServer) -> None:
    documents = [
        "Bananas are rich in potassium.",
        "Berlin is the capital of Germany.",
        "The Nile is a river in Africa.",
    ]
    payload = rerank(infinity, "What is the capital city of Germany?", documents)
    assert payload["object"] == "rerank"
    assert payload["id"].startswith("infinity-")
    assert payload["model"] == SERVED_MODEL_NAME
    assert isinstance(payload["created"], int)
    assert payload["usage"]["total_tokens"] >= payload["usage"]["prompt_tokens"] > 0
    results = payload["results"]
    assert sorted(r["index"] for r in results) == [0, 1, 2]
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)  # sigmoid unless raw_scores
    assert all(r["document"] is None for r in results)
    assert results[0]["index"] == 1


def test_probe_pair_separates_by_a_clear_margin(
    infinity: InfinityServer, tiny_model: tuple[Path, dict[str, Any]]
) -> None:
    payload = rerank(infinity, im.PROBE_QUERY, [im.PROBE_IRRELEVANT, im.PROBE_RELEVANT])
    by_index = {r["index"]: r["relevance_score"] for r in payload["results"]}
    assert payload["results"][0]["index"] == 1
    assert by_index[1] - by_index[0] >= PROBE_MARGIN, by_index
    # Infinity adds no template and applies a plain sigmoid: its scores equal the model's own.
    built = tiny_model[1]["probe"]
    assert by_index[1] == pytest.approx(built["relevant"], abs=2e-3)
    assert by_index[0] == pytest.approx(built["irrelevant"], abs=2e-3)


def test_raw_scores_are_logits_in_the_same_order(infinity: InfinityServer) -> None:
    docs = [im.PROBE_IRRELEVANT, im.PROBE_RELEVANT]
    squashed = rerank(infinity, im.PROBE_QUERY, docs)["results"]
    raw = rerank(infinity, im.PROBE_QUERY, docs, raw_scores=True)["results"]
    assert [r["index"] for r in raw] == [r["index"] for r in squashed]
    assert raw[0]["relevance_score"] > 0 > raw[1]["relevance_score"]


@pytest.mark.parametrize(
    ("query", "relevant", "irrelevant"),
    [pytest.param(*triple, id="-".join(triple[0].rstrip("?").split()[:5])) for triple in im.HELD_OUT],
)
def test_held_out_sentences_rank_relevant_first(
    infinity: InfinityServer, query: str, relevant: str, irrelevant: str
) -> None:
    payload = rerank(infinity, query, [irrelevant, relevant])
    assert payload["results"][0]["index"] == 1, payload["results"]


def test_top_n_and_return_documents(infinity: InfinityServer) -> None:
    docs = [im.PROBE_IRRELEVANT, im.PROBE_RELEVANT, "The Nile is a river in Africa."]
    payload = rerank(infinity, im.PROBE_QUERY, docs, top_n=1, return_documents=True)
    assert len(payload["results"]) == 1
    assert payload["results"][0]["index"] == 1
    assert payload["results"][0]["document"] == im.PROBE_RELEVANT  # a plain string, not {"text": ...}
    assert len(rerank(infinity, im.PROBE_QUERY, docs, top_n=10)["results"]) == 3


def test_models_lists_the_reranker(infinity: InfinityServer) -> None:
    status, payload = http("GET", f"{infinity.base_url}/models")
    assert status == 200
    assert payload["object"] == "list"
    [entry] = payload["data"]
    assert entry["id"] == SERVED_MODEL_NAME
    assert entry["owned_by"] == "infinity"
    assert "rerank" in entry["capabilities"]
    assert entry["backend"] == "torch"


def test_validation_errors_are_fastapi_422(infinity: InfinityServer) -> None:
    for body in ({"query": "x", "documents": []}, {"query": "x", "documents": ["x"], "top_n": 0}):
        status, payload = http("POST", f"{infinity.base_url}/rerank", body)
        assert status == 422
        assert payload["detail"][0]["loc"][:2] == ["body", "top_n" if "top_n" in body else "documents"]
    status, payload = http("POST", f"{infinity.base_url}/v1/rerank", {"query": "x", "documents": ["x"]})
    assert (status, payload) == (404, {"detail": "Not Found"})


def test_concurrent_requests_agree_with_sequential_ones(infinity: InfinityServer) -> None:
    """Infinity batches pairs of concurrent requests together; scores must not depend on that."""
    cases = [(q, [irr, rel, "Cats sleep most of the day."]) for q, rel, irr in im.HELD_OUT] * 3
    sequential = [rerank(infinity, q, docs)["results"] for q, docs in cases]
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        concurrent = list(pool.map(lambda case: rerank(infinity, *case)["results"], cases))
    for seq, con in zip(sequential, concurrent, strict=True):
        # Batched with other requests, the padding differs, so scores may move in the last float32
        # digits; documents sharing no word with the query tie, and their order may swap. Compare
        # scores per document, and the order only where scores differ clearly.
        alone = {r["index"]: r["relevance_score"] for r in seq}
        batched = {r["index"]: r["relevance_score"] for r in con}
        assert batched == pytest.approx(alone, abs=1e-4)
        assert [r["index"] for r in con if r["relevance_score"] > 0.01] == [
            r["index"] for r in seq if r["relevance_score"] > 0.01
        ]


def test_url_prefix_and_api_key(infinity_v1_keyed: InfinityServer) -> None:
    server = infinity_v1_keyed
    body = {"query": im.PROBE_QUERY, "documents": [im.PROBE_IRRELEVANT, im.PROBE_RELEVANT]}
    status, payload = http("POST", f"{server.base_url}/rerank", body)
    assert (status, payload) == (401, {"detail": "Unauthorized"})
    status, payload = http("POST", f"{server.base_url}/rerank", body, {"Authorization": "Bearer wrong"})
    assert status == 401
    assert rerank(server, **body)["results"][0]["index"] == 1
    status, payload = http("GET", f"{server.base_url}/models", headers=server.headers())
    assert status == 200 and payload["data"][0]["owned_by"] == "infinity"
    status, _ = http("POST", f"{server.root_url}/rerank", body, server.headers())
    assert status == 404  # routes move under the prefix ...
    status, _ = http("GET", f"{server.root_url}/health")
    assert status == 200  # ... but /health stays at the root and needs no key


# ------------------------------------------------------------------------------------------------
# our client against the real server, through the public API


def client_config(server: InfinityServer, **settings: Any) -> Any:
    from usr.plugins.a0_reranker.core.config import RerankerConfig

    return RerankerConfig(endpoint=server.root_url, api_key=server.api_key or "", timeout=20, **settings)


GRADED = [  # share 3, 2, 1 and 0 content words with the query: distinct scores, no ties to resolve
    "The capital city of France is Paris.",
    "Paris is lovely in spring.",
    "France borders Spain.",
    "Bananas are rich in potassium.",
]


@pytest.mark.parametrize("which", ["infinity", "infinity_v1_keyed"])
def test_client_detection_picks_infinity_rerank_api(which: str, request: pytest.FixtureRequest) -> None:
    from usr.plugins.a0_reranker.service import runtime

    server: InfinityServer = request.getfixturevalue(which)
    report = runtime.probe(client_config(server))
    assert report.ok, report.message
    assert (report.server, report.api, report.path) == ("infinity", "rerank", f"{server.url_prefix}/rerank")
    assert report.model == SERVED_MODEL_NAME and report.margin is not None and report.margin > 0.5


def test_client_order_matches_infinity_rerank(infinity: InfinityServer) -> None:
    from usr.plugins.a0_reranker.helpers import reranker

    cases = [(im.PROBE_QUERY, GRADED)] + [(q, [irr, rel, "Cats sleep most of the day."]) for q, rel, irr in im.HELD_OUT]
    for query, docs in cases:
        ours = reranker.rerank(query, docs, config=client_config(infinity))
        assert ours is not None
        theirs = rerank(infinity, query, docs)["results"]
        assert [i for i, _ in ours] == [r["index"] for r in theirs]
        for (_, score), result in zip(ours, theirs, strict=True):
            assert score == pytest.approx(result["relevance_score"], abs=1e-6)


@pytest.mark.anyio
async def test_client_batched_concurrent_calls(infinity: InfinityServer) -> None:
    import asyncio

    from usr.plugins.a0_reranker.helpers import reranker
    from usr.plugins.a0_reranker.service import runtime

    config = client_config(infinity, max_concurrency=2)
    cases = [(q, [irr, rel, "Cats sleep most of the day."]) for q, rel, irr in im.HELD_OUT] * 4
    alone = [await reranker.rerank_async(q, docs, config=config) for q, docs in cases[: len(im.HELD_OUT)]]
    before = runtime.statistics()
    together = await asyncio.gather(*(reranker.rerank_async(q, docs, config=config) for q, docs in cases))
    after = runtime.statistics()
    for index, ranking in enumerate(together):
        expected = alone[index % len(im.HELD_OUT)]
        assert ranking is not None and expected is not None
        assert [i for i, _ in ranking] == [i for i, _ in expected]
    assert after.fallback_total == before.fallback_total
    assert after.http_requests - before.http_requests < len(cases)  # same-query recalls were merged
