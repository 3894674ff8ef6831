"""The loopback test servers answer as the real servers do (their documentation and source).

Every other test of the project talks to these servers, so here they are checked against the
recorded facts with plain aiohttp requests: routes, shapes, status codes, error bodies, auth,
limits, ordering, the Qwen3 template behaviour, and the instrumentation (recording, in-flight
counts, the gate, faults).
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from multidict import CIMultiDictProxy

from support.servers import (
    DEFAULT_INSTRUCTION,
    KINDS,
    PREFIX,
    SUFFIX,
    Delay,
    Disconnect,
    Hang,
    InvalidJson,
    Redirect,
    Respond,
    RunningServer,
    SizedBody,
    StallBody,
    lexical_scorer,
    serve_in_thread,
    start_server,
    to_logit,
)
from support.servers.llamacpp import LlamaCppApp
from support.servers.qwen3_judge import parse, render

pytestmark = pytest.mark.anyio

QUERY = "What is the capital city of Germany?"
DOCS = ["Bananas are rich in potassium.", "Berlin is the capital of Germany.", "The Nile is a river in Africa."]
BEST = 1  # DOCS[1] answers QUERY
_UNSET: Any = object()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str | None
    text: str
    headers: CIMultiDictProxy[str]

    @property
    def json(self) -> Any:
        return json.loads(self.text)


async def call(method: str, url: str, body: Any = _UNSET, *, data: str | bytes | None = None,
               headers: dict[str, str] | None = None, key: str | None = None) -> Reply:
    """One request on a fresh session; ``key`` adds a Bearer header."""
    headers = dict(headers or {})
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    kwargs: dict[str, Any] = {"headers": headers, "allow_redirects": False}
    if body is not _UNSET:
        kwargs["json"] = body
    if data is not None:
        kwargs["data"] = data
    async with aiohttp.ClientSession() as session, session.request(method, url, **kwargs) as response:
        text = await response.text()
        return Reply(response.status, response.headers.get("Content-Type"), text, response.headers)


async def post(url: str, body: Any = _UNSET, **kwargs: Any) -> Reply:
    return await call("POST", url, body, **kwargs)


async def get(url: str, **kwargs: Any) -> Reply:
    return await call("GET", url, **kwargs)


@asynccontextmanager
async def running(kind: str, **options: Any) -> AsyncIterator[RunningServer]:
    server = await start_server(kind, **options)
    try:
        yield server
    finally:
        await server.close()


def rerank_body(**extra: Any) -> dict[str, Any]:
    return {"query": QUERY, "documents": DOCS, **extra}


def assert_best_first(scores: list[float]) -> None:
    assert scores == sorted(scores, reverse=True)


# --------------------------------------------------------------------------------------------
# scorer and registry


async def test_lexical_scorer_separates_the_detection_probe() -> None:
    query = "What is the capital of France?"
    relevant = lexical_scorer(query, "Paris is the capital of France.")
    unrelated = lexical_scorer(query, "Bananas are rich in potassium.")
    assert 0.0 <= unrelated < relevant <= 1.0
    assert relevant - unrelated > 0.3
    assert lexical_scorer(query, "Paris is the capital of France.") == relevant


async def test_lexical_scorer_orders_equal_overlaps_deterministically() -> None:
    a = lexical_scorer("apples", "pears")
    b = lexical_scorer("apples", "plums")
    assert a != b and 0.0 <= a < 0.001 and 0.0 <= b < 0.001


async def test_to_logit_inverts_the_sigmoid_and_stays_bounded() -> None:
    assert to_logit(0.5) == pytest.approx(0.0)
    assert to_logit(0.9) == pytest.approx(2.1972, abs=1e-3)
    assert -10 < to_logit(0.0) < -9 and 9 < to_logit(1.0) < 10


async def test_every_documented_kind_is_registered() -> None:
    assert set(KINDS) == {"cohere", "jina", "voyage", "mixedbread", "together", "xinference", "localai",
                          "siliconflow", "infinity", "tei", "vllm", "vllm_qwen3", "vllm_qwen3_templated",
                          "llamacpp", "sglang", "ollama", "litellm"}


async def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown server kind"):
        await start_server("nope")


UNKNOWN_ROUTE = {
    "tei": (404, None, ""),
    "infinity": (404, "application/json", {"detail": "Not Found"}),
    "vllm": (404, "application/json",
             {"error": {"message": "Not Found", "type": "Not Found", "param": None, "code": 404}}),
    "llamacpp": (404, "application/json",
                 {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}),
    "sglang": (404, "application/json", {"detail": "Not Found"}),
    "cohere": (404, "application/json", {"message": "Not Found"}),
    "ollama": (404, "text/plain; charset=utf-8", "404 page not found"),
}


@pytest.mark.parametrize("kind", sorted(UNKNOWN_ROUTE))
async def test_unknown_route_fingerprint(kind: str) -> None:
    status, content_type, body = UNKNOWN_ROUTE[kind]
    async with running(kind) as srv:
        reply = await get(srv.url + "/no/such/route")
    assert (reply.status, reply.content_type) == (status, content_type)
    assert (reply.json if isinstance(body, dict) else reply.text) == body


async def test_old_vllm_unknown_route_is_fastapi_404() -> None:
    async with running("vllm", error_style="old") as srv:
        reply = await get(srv.url + "/v1/nothing")
    assert (reply.status, reply.json) == (404, {"detail": "Not Found"})


# --------------------------------------------------------------------------------------------
# Cohere and the hosted APIs


async def test_cohere_v1_ranks_and_echoes_documents() -> None:
    docs: list[Any] = [DOCS[0], {"text": DOCS[1], "id": "b"}, DOCS[2]]
    async with running("cohere") as srv:
        reply = await post(srv.url + "/v1/rerank", {"query": QUERY, "documents": docs,
                                                    "return_documents": True, "top_n": 2})
    body = reply.json
    assert reply.status == 200 and set(body) == {"id", "results", "meta"}
    assert body["meta"]["api_version"] == {"version": "1"} and "billed_units" in body["meta"]
    assert body["results"][0]["index"] == BEST and len(body["results"]) == 2
    assert body["results"][0]["document"] == {"text": DOCS[1], "id": "b"}
    assert body["results"][1]["document"] == {"text": DOCS[body["results"][1]["index"]]}
    assert_best_first([r["relevance_score"] for r in body["results"]])


async def test_cohere_v1_rank_fields_choose_the_scored_text() -> None:
    docs = [{"title": "Berlin is the capital of Germany", "text": "x"}, {"title": "Bananas", "text": QUERY}]
    async with running("cohere") as srv:
        reply = await post(srv.url + "/v1/rerank", {"query": QUERY, "documents": docs, "rank_fields": ["title"]})
    assert reply.json["results"][0]["index"] == 0
    assert "document" not in reply.json["results"][0]


async def test_cohere_v2_needs_model_takes_strings_and_returns_no_documents() -> None:
    async with running("cohere") as srv:
        missing = await post(srv.url + "/v2/rerank", rerank_body())
        objects = await post(srv.url + "/v2/rerank", {"model": "rerank-v3.5", "query": QUERY,
                                                      "documents": [{"text": "a"}]})
        ok = await post(srv.url + "/v2/rerank", rerank_body(model="rerank-v3.5", return_documents=True))
    assert missing.status == 400 and missing.json["message"].startswith("invalid request:")
    assert objects.status == 400 and set(objects.json) == {"message"}
    assert ok.json["meta"]["api_version"] == {"version": "2"}
    assert all(set(r) == {"index", "relevance_score"} for r in ok.json["results"])


async def test_cohere_errors_and_auth() -> None:
    async with running("cohere", api_key="k") as srv:
        empty = await post(srv.url + "/v1/rerank", {"query": "q", "documents": []}, key="k")
        no_key = await post(srv.url + "/v1/rerank", rerank_body())
        wrong = await post(srv.url + "/v1/rerank", rerank_body(), key="bad")
    assert (empty.status, empty.json) == (400, {"message": "invalid request: list of documents must not be empty"})
    assert (no_key.status, no_key.json) == (401, {"message": "no api key supplied"})
    assert (wrong.status, wrong.json) == (401, {"message": "invalid api token"})
    async with running("cohere", api_key="k", invalid_token_status=498) as srv:
        wrong = await post(srv.url + "/v2/rerank", rerank_body(model="m"), key="bad")
    assert (wrong.status, wrong.json) == (498, {"message": "invalid api token"})


async def test_jina_returns_documents_only_when_asked() -> None:
    async with running("jina") as srv:
        plain = await post(srv.url + "/v1/rerank", rerank_body(model="jina-reranker-m0"))
        with_docs = await post(srv.url + "/v1/rerank", rerank_body(return_documents=True, top_n=1))
    assert set(plain.json) == {"model", "usage", "results"} and plain.json["model"] == "jina-reranker-m0"
    assert "total_tokens" in plain.json["usage"]
    assert all("document" not in r for r in plain.json["results"])
    assert with_docs.json["results"] == [{"index": BEST, "document": {"text": DOCS[BEST]},
                                          "relevance_score": with_docs.json["results"][0]["relevance_score"]}]


async def test_localai_always_returns_documents_and_prompt_tokens() -> None:
    async with running("localai") as srv:
        reply = await post(srv.url + "/v1/rerank", rerank_body())
        objects = await post(srv.url + "/v1/rerank", {"query": QUERY, "documents": [{"text": "x"}]})
    assert {"total_tokens", "prompt_tokens"} <= set(reply.json["usage"])
    assert all(r["document"] == {"text": DOCS[r["index"]]} for r in reply.json["results"])
    assert objects.status == 400 and set(objects.json["error"]) == {"code", "message", "type"}


async def test_voyage_uses_top_k_and_data() -> None:
    async with running("voyage") as srv:
        reply = await post(srv.url + "/v1/rerank", rerank_body(top_k=2, return_documents=True, model="rerank-2.5"))
        too_many = await post(srv.url + "/v1/rerank", {"query": "q", "documents": ["d"] * 1001, "model": "rerank-2.5"})
    body = reply.json
    assert body["object"] == "list" and "results" not in body and set(body["usage"]) == {"total_tokens"}
    assert body["data"][0]["index"] == BEST and len(body["data"]) == 2
    assert body["data"][0]["document"] == DOCS[BEST]
    assert too_many.status == 400


@pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")  # aiohttp: bodies over 1 MiB
@pytest.mark.parametrize(("model", "cap"), [("rerank-2.5", 600_000), ("rerank-1", 300_000)])
async def test_voyage_caps_the_tokens_of_a_request_even_with_truncation(model: str, cap: int) -> None:
    """query tokens × documents + all document tokens (docs.voyageai.com/reference/reranker-api)."""
    query, doc = "q" * 400, "d" * 3600  # 100 + 900 tokens a pair under the stand-in's count
    async with running("voyage") as srv:
        fits = await post(srv.url + "/v1/rerank", {"model": model, "query": query, "documents": [doc] * (cap // 1000)})
        over = await post(srv.url + "/v1/rerank", {"model": model, "query": query,
                                                   "documents": [doc] * (cap // 1000 + 1)})
    assert fits.status == 200 and over.status == 400


@pytest.mark.parametrize(("kind", "path", "documents_key"), [("voyage", "/v1/rerank", "documents"),
                                                              ("mixedbread", "/v1/reranking", "input")])
async def test_voyage_and_mixedbread_need_a_model(kind: str, path: str, documents_key: str) -> None:
    """Both references mark ``model`` required (docs.voyageai.com/reference/reranker-api,
    mixedbread.com/api-reference/endpoints/reranking)."""
    async with running(kind) as srv:
        without = await post(srv.url + path, {"query": QUERY, documents_key: DOCS})
        named = await post(srv.url + path, {"query": QUERY, documents_key: DOCS, "model": "m"})
    assert without.status == 400 and named.status == 200


async def test_voyage_refuses_long_input_only_without_truncation() -> None:
    long_doc = "word " * 200
    async with running("voyage", max_pair_tokens=100) as srv:
        truncated = await post(srv.url + "/v1/rerank", {"query": "q", "documents": [long_doc], "model": "rerank-2.5"})
        refused = await post(srv.url + "/v1/rerank", {"query": "q", "documents": [long_doc], "model": "rerank-2.5",
                                                      "truncation": False})
    assert truncated.status == 200 and refused.status == 400


async def test_mixedbread_reranking_shape() -> None:
    async with running("mixedbread") as srv:
        reply = await post(srv.url + "/v1/reranking", {"query": QUERY, "input": DOCS, "top_k": 2,
                                                       "return_input": True, "model": "mxbai-rerank-large-v2"})
        wrong_route = await post(srv.url + "/v1/rerank", rerank_body())
    body = reply.json
    assert body["object"] == "list" and body["top_k"] == 2 and body["return_input"] is True
    assert body["data"][0] == {"index": BEST, "score": body["data"][0]["score"], "input": DOCS[BEST],
                               "object": "rank_result"}
    assert wrong_route.status == 404


async def test_together_is_cohere_shaped_with_object_rerank() -> None:
    async with running("together") as srv:
        reply = await post(srv.url + "/v1/rerank", rerank_body(model="m", top_n=1))
    body = reply.json
    assert body["object"] == "rerank" and body["model"] == "m" and "id" in body and "usage" in body
    assert body["results"] == [{"index": BEST, "relevance_score": body["results"][0]["relevance_score"],
                                "document": None}]


async def test_xinference_needs_model_and_answers_with_meta() -> None:
    async with running("xinference") as srv:
        missing = await post(srv.url + "/v1/rerank", rerank_body())
        reply = await post(srv.url + "/v1/rerank", rerank_body(model="bge", return_documents=True))
        models = await get(srv.url + "/v1/models")
    assert missing.status == 400 and "detail" in missing.json
    assert {"api_version", "billed_units", "tokens", "warnings"} <= set(reply.json["meta"])
    assert reply.json["results"][0]["document"] == {"text": DOCS[BEST]}
    assert models.json["data"][0]["owned_by"] == "xinference"


async def test_xinference_lists_every_running_model_with_its_type() -> None:
    async with running("xinference", other_models=(("qwen2.5-instruct", "LLM"),)) as srv:
        models = await get(srv.url + "/v1/models")
        on_llm = await post(srv.url + "/v1/rerank", rerank_body(model="qwen2.5-instruct"))
    assert [(m["id"], m["model_type"]) for m in models.json["data"]] == [
        ("qwen2.5-instruct", "LLM"), ("bge-reranker-v2-m3", "rerank")]
    assert (on_llm.status, on_llm.json) == (500, {"detail": "Model qwen2.5-instruct is not for reranking."})


async def test_siliconflow_accepts_instruction_and_reports_tokens() -> None:
    async with running("siliconflow") as srv:
        reply = await post(srv.url + "/v1/rerank", rerank_body(instruction="Find the answer", model="m"))
    assert set(reply.json) == {"id", "results", "tokens"}
    assert set(reply.json["tokens"]) == {"input_tokens", "output_tokens"}
    assert reply.json["results"][0]["index"] == BEST


@pytest.mark.parametrize("kind", ["cohere", "jina", "voyage", "together", "siliconflow", "sglang"])
async def test_hosted_apis_check_the_bearer_key(kind: str) -> None:
    path = "/v1/rerank"
    async with running(kind, api_key="secret") as srv:
        refused = await post(srv.url + path, rerank_body(model="m"))
        allowed = await post(srv.url + path, rerank_body(model="m"), key="secret")
    assert refused.status == 401 and allowed.status == 200


# --------------------------------------------------------------------------------------------
# Infinity


async def test_infinity_rerank_matches_the_observed_exchange() -> None:
    async with running("infinity") as srv:
        reply = await post(srv.url + "/rerank", rerank_body(model="minilm-l6-ce"))
    body = reply.json
    assert reply.status == 200 and reply.content_type == "application/json"
    assert list(body) == ["object", "results", "model", "usage", "id", "created"]
    assert body["object"] == "rerank" and body["id"].startswith("infinity-") and body["model"] == "minilm-l6-ce"
    assert set(body["usage"]) == {"prompt_tokens", "total_tokens"}
    assert [list(r) for r in body["results"]] == [["relevance_score", "index", "document"]] * 3
    assert body["results"][0]["index"] == BEST and all(r["document"] is None for r in body["results"])
    assert_best_first([r["relevance_score"] for r in body["results"]])


async def test_infinity_top_n_documents_and_raw_scores() -> None:
    async with running("infinity") as srv:
        cut = await post(srv.url + "/rerank", rerank_body(top_n=2, return_documents=True))
        many = await post(srv.url + "/rerank", rerank_body(top_n=10))
        raw = await post(srv.url + "/rerank", rerank_body(raw_scores=True))
    assert cut.json["results"][0]["document"] == DOCS[BEST] and len(cut.json["results"]) == 2
    assert len(many.json["results"]) == 3
    best = raw.json["results"][0]["relevance_score"]
    assert best == pytest.approx(to_logit(lexical_scorer(QUERY, DOCS[BEST])))


async def test_infinity_strips_whitespace_before_scoring_and_echo() -> None:
    seen: list[tuple[str, str]] = []

    def scorer(query: str, doc: str) -> float:
        seen.append((query, doc))
        return 0.5

    async with running("infinity", scorer=scorer) as srv:
        reply = await post(srv.url + "/rerank", {"query": "  q \n", "documents": ["\t d1 ", "d2\n"],
                                                 "return_documents": True})
    assert seen == [("q", "d1"), ("q", "d2")]
    assert [r["document"] for r in reply.json["results"]] == ["d1", "d2"]


async def test_infinity_validation_is_fastapi_422() -> None:
    async with running("infinity", max_client_batch_size=4) as srv:
        empty = await post(srv.url + "/rerank", {"query": "q", "documents": []})
        zero = await post(srv.url + "/rerank", rerank_body(top_n=0))
        bad_json = await post(srv.url + "/rerank", data='{"query": ', headers={"Content-Type": "application/json"})
        missing = await post(srv.url + "/rerank", {"documents": ["a"]})
        too_many = await post(srv.url + "/rerank", {"query": "q", "documents": ["a"] * 5})
    assert empty.status == 422
    assert empty.json["detail"][0]["type"] == "too_short" and empty.json["detail"][0]["loc"] == ["body", "documents"]
    assert empty.json["detail"][0]["msg"] == "List should have at least 1 item after validation, not 0"
    assert (zero.status, zero.json["detail"][0]["type"], zero.json["detail"][0]["loc"]) == (
        422, "greater_than", ["body", "top_n"])
    assert bad_json.status == 422 and bad_json.json["detail"][0]["type"] == "json_invalid"
    assert missing.json["detail"][0]["loc"] == ["body", "query"] and missing.json["detail"][0]["type"] == "missing"
    assert too_many.status == 422 and too_many.json["detail"][0]["type"] == "too_long"


async def test_infinity_model_selection() -> None:
    async with running("infinity") as srv:
        any_name = await post(srv.url + "/rerank", rerank_body(model="nope"))
    assert any_name.status == 200 and any_name.json["model"] == "minilm-l6-ce"
    async with running("infinity", models=["minilm-l6-ce"], embedding_models=["all-minilm-l6-v2"]) as srv:
        wrong = await post(srv.url + "/rerank", rerank_body(model="nope"))
        unnamed = await post(srv.url + "/rerank", rerank_body())
        embed = await post(srv.url + "/rerank", rerank_body(model="all-minilm-l6-v2"))
        right = await post(srv.url + "/rerank", rerank_body(model="minilm-l6-ce"))
    assert wrong.status == 400 and wrong.json == {"error": {
        "message": "Invalid model: Engine for model name `nope` not found. Available model names are "
                   "['minilm-l6-ce', 'all-minilm-l6-v2']", "type": None, "param": None, "code": 400}}
    assert unnamed.status == 400 and "`default/not-specified`" in unnamed.json["error"]["message"]
    assert embed.status == 400 and embed.json["error"]["message"].startswith(
        "ModelNotDeployedError: model=`all-minilm-l6-v2` does not support `rerank`.")
    assert right.status == 200


async def test_infinity_models_health_and_prefix() -> None:
    async with running("infinity", url_prefix="/v1", models=["a", "b"]) as srv:
        models = await get(srv.url + "/v1/models")
        unprefixed = await post(srv.url + "/rerank", rerank_body(model="a"))
        prefixed = await post(srv.url + "/v1/rerank", rerank_body(model="a"))
        health = await get(srv.url + "/health")
    entry = models.json["data"][0]
    assert models.json["object"] == "list" and [e["id"] for e in models.json["data"]] == ["a", "b"]
    assert entry["owned_by"] == "infinity" and entry["capabilities"] == ["rerank"] and entry["object"] == "model"
    assert set(entry["stats"]) == {"queue_fraction", "queue_absolute", "results_pending", "batch_size"}
    assert (unprefixed.status, unprefixed.json) == (404, {"detail": "Not Found"})
    assert prefixed.status == 200 and isinstance(health.json["unix"], float)


async def test_infinity_auth() -> None:
    async with running("infinity", api_key="k") as srv:
        refused = await post(srv.url + "/rerank", rerank_body())
        models = await get(srv.url + "/models", key="bad")
        health = await get(srv.url + "/health")
        allowed = await post(srv.url + "/rerank", rerank_body(), key="k")
    assert (refused.status, refused.json) == (401, {"detail": "Unauthorized"})
    assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert models.status == 401 and health.status == 200 and allowed.status == 200


# --------------------------------------------------------------------------------------------
# TEI


async def test_tei_info_identifies_a_reranker() -> None:
    async with running("tei", max_client_batch_size=8) as srv:
        info = (await get(srv.url + "/info")).json
    assert info["max_client_batch_size"] == 8 and info["version"] == "1.9.3"
    assert list(info["model_type"]) == ["reranker"] and info["auto_truncate"] is True


async def test_tei_rerank_is_a_bare_sorted_list() -> None:
    async with running("tei") as srv:
        plain = await post(srv.url + "/rerank", {"query": QUERY, "texts": DOCS})
        texts = await post(srv.url + "/rerank", {"query": QUERY, "texts": DOCS, "return_text": True,
                                                 "raw_scores": True})
        sagemaker = await post(srv.url + "/invocations", {"query": QUERY, "texts": DOCS})
    assert isinstance(plain.json, list) and [set(i) for i in plain.json] == [{"index", "score"}] * 3
    assert plain.json[0]["index"] == BEST and "x-compute-tokens" in plain.headers
    assert_best_first([i["score"] for i in plain.json])
    assert texts.json[0]["text"] == DOCS[BEST]
    assert texts.json[0]["score"] == pytest.approx(to_logit(lexical_scorer(QUERY, DOCS[BEST])))
    assert sagemaker.json == plain.json


async def test_tei_refuses_a_cohere_shaped_body_as_text() -> None:
    async with running("tei") as srv:
        reply = await post(srv.url + "/rerank", rerank_body())
    assert reply.status == 422 and reply.content_type == "text/plain; charset=utf-8"
    assert reply.text.startswith("Failed to deserialize the JSON body")
    assert "missing field `texts`" in reply.text


async def test_tei_limits_and_errors() -> None:
    async with running("tei") as srv:
        empty = await post(srv.url + "/rerank", {"query": "q", "texts": []})
        many = await post(srv.url + "/rerank", {"query": "q", "texts": ["t"] * 40})
        limit = await post(srv.url + "/rerank", {"query": "q", "texts": ["t"] * 32})
        bad_json = await post(srv.url + "/rerank", data="{", headers={"Content-Type": "application/json"})
        no_type = await post(srv.url + "/rerank", data='{"query":"q","texts":["t"]}')
    assert (empty.status, empty.json) == (400, {"error": "`texts` cannot be empty", "error_type": "Empty"})
    assert (many.status, many.json) == (422, {"error": "batch size 40 > maximum allowed batch size 32",
                                              "error_type": "Validation"})
    assert limit.status == 200
    assert bad_json.status == 400 and str(bad_json.content_type).startswith("text/plain")
    assert no_type.status == 415


async def test_tei_has_no_openai_routes_and_an_empty_404() -> None:
    async with running("tei") as srv:
        for path in ("/v1/rerank", "/v1/models"):
            reply = await call("POST" if path.endswith("rerank") else "GET", srv.url + path)
            assert (reply.status, reply.text) == (404, "")


async def test_tei_auth_is_an_empty_401_except_public_routes() -> None:
    async with running("tei", api_key="k") as srv:
        info = await get(srv.url + "/info")
        rerank = await post(srv.url + "/rerank", {"query": "q", "texts": ["t"]}, key="bad")
        health = await get(srv.url + "/health")
        allowed = await post(srv.url + "/rerank", {"query": "q", "texts": ["t"]}, key="k")
    assert (info.status, info.text, rerank.status, rerank.text) == (401, "", 401, "")
    assert health.status == 200 and allowed.status == 200


async def test_tei_embedding_model_refuses_rerank() -> None:
    async with running("tei", reranker=False) as srv:
        info = (await get(srv.url + "/info")).json
        reply = await post(srv.url + "/rerank", {"query": "q", "texts": ["t"]})
    assert list(info["model_type"]) == ["embedding"]
    assert (reply.status, reply.json) == (424, {"error": "model is not a re-ranker model", "error_type": "Backend"})


# --------------------------------------------------------------------------------------------
# vLLM


async def test_vllm_rerank_matches_the_observed_exchange() -> None:
    async with running("vllm") as srv:
        reply = await post(srv.url + "/v1/rerank", rerank_body(model="minilm-l6-ce", top_n=2))
    body = reply.json
    assert list(body) == ["id", "model", "usage", "results"] and body["id"].startswith("score-")
    assert set(body["usage"]) == {"prompt_tokens", "total_tokens"}
    assert body["results"][0] == {"index": BEST, "document": {"text": DOCS[BEST], "multi_modal": None},
                                  "relevance_score": body["results"][0]["relevance_score"]}
    assert len(body["results"]) == 2
    assert_best_first([r["relevance_score"] for r in body["results"]])


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank", "/v2/rerank"])
async def test_vllm_rerank_routes_and_top_n_zero_means_all(path: str) -> None:
    async with running("vllm") as srv:
        reply = await post(srv.url + path, rerank_body(top_n=0))
    assert len(reply.json["results"]) == 3


async def test_vllm_score_keeps_input_order() -> None:
    async with running("vllm") as srv:
        reply = await post(srv.url + "/score", {"model": "minilm-l6-ce", "text_1": QUERY, "text_2": DOCS})
        alias = await post(srv.url + "/v1/score", {"text_1": QUERY, "text_2": DOCS})
    body = reply.json
    assert list(body) == ["id", "object", "created", "model", "data", "usage"] and body["object"] == "list"
    assert [d["index"] for d in body["data"]] == [0, 1, 2] and {d["object"] for d in body["data"]} == {"score"}
    assert body["data"][1]["score"] == pytest.approx(lexical_scorer(QUERY, DOCS[1]))
    assert body["usage"]["completion_tokens"] == 0 and body["usage"]["prompt_tokens_details"] is None
    assert [d["score"] for d in alias.json["data"]] == [d["score"] for d in body["data"]]


async def test_vllm_score_forms_and_pairing_rules() -> None:
    async with running("vllm") as srv:
        queries = await post(srv.url + "/score", {"queries": QUERY, "documents": DOCS})
        data = await post(srv.url + "/score", {"data_1": [QUERY], "data_2": DOCS})
        n_to_n = await post(srv.url + "/score", {"text_1": ["a b", "c d"], "text_2": ["a b", "x"]})
        bad = await post(srv.url + "/score", {"text_1": ["a", "b"], "text_2": ["a", "b", "c"]})
    assert len(queries.json["data"]) == 3 and len(data.json["data"]) == 3
    assert n_to_n.json["data"][0]["score"] > n_to_n.json["data"][1]["score"]
    assert bad.status == 400 and bad.json["error"]["message"] == "Input lengths must be either 1:1, 1:N or N:N"


async def test_vllm_errors() -> None:
    async with running("vllm") as srv:
        wrong_model = await post(srv.url + "/v1/rerank", rerank_body(model="nope"))
        empty = await post(srv.url + "/rerank", {"query": "q", "documents": []})
        objects = await post(srv.url + "/rerank", {"query": "q", "documents": [{"text": "a"}]})
        bad_json = await post(srv.url + "/rerank", data='{"query": x}', headers={"Content-Type": "application/json"})
    assert (wrong_model.status, wrong_model.json) == (404, {"error": {
        "message": "The model `nope` does not exist.", "type": "NotFoundError", "param": None, "code": 404}})
    assert (empty.status, empty.json["error"]["message"], empty.json["error"]["type"]) == (
        400, "At least one text_pair element must be given", "BadRequestError")
    assert objects.status == 400
    error = bad_json.json["error"]
    assert bad_json.status == 400 and error["type"] == "Bad Request" and error["code"] == 400
    assert error["message"].startswith("1 validation error") and "json_invalid" in error["message"]
    assert error["param"] == "body.10"


async def test_vllm_context_length_and_truncation() -> None:
    long_doc = "x" * 2100  # 525 stand-in tokens
    async with running("vllm") as srv:
        refused = await post(srv.url + "/rerank", {"query": "q", "documents": [long_doc]})
        truncated = await post(srv.url + "/rerank", {"query": "q", "documents": [long_doc],
                                                     "truncate_prompt_tokens": 512})
    assert refused.status == 400 and refused.json["error"]["param"] == "input_tokens"
    assert refused.json["error"]["message"].startswith(
        "This model's maximum context length is 512 tokens. However, your prompt contains at least 513 input tokens")
    assert truncated.status == 200


async def test_vllm_use_activation_false_gives_logits() -> None:
    async with running("vllm") as srv:
        reply = await post(srv.url + "/score", {"text_1": QUERY, "text_2": DOCS[BEST], "use_activation": False})
    assert reply.json["data"][0]["score"] == pytest.approx(to_logit(lexical_scorer(QUERY, DOCS[BEST])))


async def test_vllm_gets_for_detection() -> None:
    async with running("vllm", model="my-model", max_model_len=1024) as srv:
        models = await get(srv.url + "/v1/models")
        version = await get(srv.url + "/version")
        health = await get(srv.url + "/health")
    entry = models.json["data"][0]
    assert (entry["id"], entry["owned_by"], entry["max_model_len"]) == ("my-model", "vllm", 1024)
    assert "version" in version.json and (health.status, health.text) == (200, "")


async def test_vllm_api_key_guards_only_v1_paths() -> None:
    async with running("vllm", api_key="k") as srv:
        v1 = await post(srv.url + "/v1/rerank", rerank_body())
        models = await get(srv.url + "/v1/models")
        unknown = await get(srv.url + "/v1/unknown")
        rerank = await post(srv.url + "/rerank", rerank_body())
        score = await post(srv.url + "/score", {"text_1": "a", "text_2": "b"})
        keyed = await post(srv.url + "/v1/rerank", rerank_body(), key="k")
    assert (v1.status, v1.json) == (401, {"error": "Unauthorized"})
    assert models.status == 401 and unknown.status == 401
    assert (rerank.status, score.status, keyed.status) == (200, 200, 200)


async def test_old_vllm_is_flat_and_knows_only_text_1_text_2() -> None:
    async with running("vllm", error_style="old") as srv:
        rerank = await post(srv.url + "/rerank", rerank_body())
        wrong_model = await post(srv.url + "/rerank", rerank_body(model="nope"))
        queries = await post(srv.url + "/score", {"queries": "q", "documents": ["d"]})
    assert rerank.json["usage"] == {"total_tokens": rerank.json["usage"]["total_tokens"]}
    assert rerank.json["results"][0]["document"] == {"text": DOCS[BEST]}
    assert wrong_model.json == {"object": "error", "message": "The model `nope` does not exist.",
                                "type": "NotFoundError", "param": None, "code": 404}
    assert queries.status == 400 and queries.json["param"] == "body.text_1"


# --------------------------------------------------------------------------------------------
# vLLM serving Qwen3-Reranker without a template


def qwen3_split(query: str, doc: str, instruction: str = DEFAULT_INSTRUCTION) -> tuple[str, str]:
    """The split of vLLM's Qwen3 example (QwenLM/Qwen3-Embedding README, "Transformers Usage"), written out by hand here."""
    return (f"{PREFIX}<Instruct>: {instruction}\n<Query>: {query}\n",
            f"<Document>: {doc}{SUFFIX}")


async def test_qwen3_judge_parses_only_the_exact_prompt() -> None:
    prompt = render("q?", "some doc", "Find it")
    assert parse(prompt) is not None and parse(prompt).instruction == "Find it"  # type: ignore[union-attr]
    assert parse(prompt).document == "some doc"  # type: ignore[union-attr]
    assert parse(prompt[:-1]) is None  # a jinja-style lost trailing newline
    assert parse(prompt.replace("\n<Query>", "\n\n<Query>")) is None
    assert parse(render("q", "d", "two\nlines")) is None


async def test_vllm_qwen3_scores_the_templated_score_request() -> None:
    france = "What is the capital of France?"
    docs = ["Paris is the capital of France.", "Bananas are rich in potassium."]
    pairs = [qwen3_split(france, doc, "Judge the passage") for doc in docs]
    async with running("vllm_qwen3") as srv:
        reply = await post(srv.url + "/score", {"text_1": [p[0] for p in pairs], "text_2": [p[1] for p in pairs]})
    scores = [d["score"] for d in reply.json["data"]]
    assert scores == pytest.approx([lexical_scorer(france, doc) for doc in docs])
    assert scores[0] - scores[1] > 0.3


async def test_vllm_qwen3_rerank_with_the_split_template_is_meaningful() -> None:
    query_part, _ = qwen3_split(QUERY, "")
    documents = [qwen3_split(QUERY, doc)[1] for doc in DOCS]
    async with running("vllm_qwen3") as srv:
        reply = await post(srv.url + "/v1/rerank", {"query": query_part, "documents": documents})
    assert reply.json["results"][0]["index"] == BEST
    assert reply.json["results"][0]["relevance_score"] == pytest.approx(lexical_scorer(QUERY, DOCS[BEST]))


async def test_vllm_qwen3_raw_text_gets_meaningless_stable_scores() -> None:
    async with running("vllm_qwen3") as srv:
        first = await post(srv.url + "/rerank", rerank_body())
        again = await post(srv.url + "/v1/rerank", rerank_body())
        score = await post(srv.url + "/score", {"text_1": QUERY, "text_2": DOCS})
    scores = [r["relevance_score"] for r in first.json["results"]]
    assert all(0.45 <= s < 0.55 for s in scores) and max(scores) - min(scores) < 0.1
    assert first.json["results"] == again.json["results"]
    assert sorted(d["score"] for d in score.json["data"]) == sorted(scores)


async def test_vllm_qwen3_near_miss_templates_are_meaningless() -> None:
    query_part, doc_part = qwen3_split(QUERY, DOCS[BEST])
    near_misses = [
        (query_part.replace("\n<Query>", "\n\n<Query>"), doc_part),  # the README's double newlines
        (query_part, doc_part[:-1]),  # trailing newline dropped, as a jinja render does
        (query_part.rstrip("\n"), doc_part),  # no separator between query and document
    ]
    async with running("vllm_qwen3") as srv:
        for text_1, text_2 in near_misses:
            reply = await post(srv.url + "/score", {"text_1": text_1, "text_2": text_2})
            assert 0.45 <= reply.json["data"][0]["score"] < 0.55


async def test_vllm_qwen3_truncation_can_cut_the_suffix() -> None:
    query_part, doc_part = qwen3_split(QUERY, DOCS[BEST])
    async with running("vllm_qwen3") as srv:
        reply = await post(srv.url + "/score", {"text_1": query_part, "text_2": doc_part,
                                                "truncate_prompt_tokens": 60})
    assert 0.45 <= reply.json["data"][0]["score"] < 0.55


async def test_vllm_qwen3_inverted_ranks_raw_text_wrongly() -> None:
    async with running("vllm_qwen3", untemplated="inverted") as srv:
        reply = await post(srv.url + "/rerank", rerank_body())
        models = await get(srv.url + "/v1/models")
    assert reply.json["results"][-1]["index"] == BEST
    assert models.json["data"][0]["id"] == "Qwen/Qwen3-Reranker-0.6B"


# --------------------------------------------------------------------------------------------
# vLLM serving Qwen3-Reranker with its score template (--chat-template)


async def test_vllm_qwen3_templated_renders_raw_rerank_texts_into_the_judge_prompt() -> None:
    async with running("vllm_qwen3_templated") as srv:
        reply = await post(srv.url + "/rerank", rerank_body(instruction="Find the capital"))
        score = await post(srv.url + "/score", {"text_1": QUERY, "text_2": DOCS})
    assert reply.json["results"][0]["index"] == BEST
    assert reply.json["results"][0]["relevance_score"] == pytest.approx(lexical_scorer(QUERY, DOCS[BEST]))
    assert [d["score"] for d in score.json["data"]] == pytest.approx([lexical_scorer(QUERY, d) for d in DOCS])
    assert srv.requests[0].json["instruction"] == "Find the capital"


async def test_vllm_qwen3_templated_judges_a_twice_templated_pair_with_less_confidence() -> None:
    pairs = [qwen3_split(QUERY, doc) for doc in DOCS]
    async with running("vllm_qwen3_templated") as srv:
        twice = await post(srv.url + "/score", {"text_1": [p[0] for p in pairs], "text_2": [p[1] for p in pairs]})
        once = await post(srv.url + "/score", {"text_1": QUERY, "text_2": DOCS})
    twice_scores = [d["score"] for d in twice.json["data"]]
    once_scores = [d["score"] for d in once.json["data"]]
    assert max(range(len(DOCS)), key=twice_scores.__getitem__) == BEST  # still ranks the best first ...
    margin = twice_scores[BEST] - max(s for i, s in enumerate(twice_scores) if i != BEST)
    assert 0 < margin < once_scores[BEST] - max(s for i, s in enumerate(once_scores) if i != BEST)  # ... worse
    assert all(abs(t - 0.5) < abs(o - 0.5) for t, o in zip(twice_scores, once_scores, strict=True))


async def test_vllm_qwen3_templated_truncation_cuts_the_rendered_suffix() -> None:
    async with running("vllm_qwen3_templated") as srv:
        reply = await post(srv.url + "/rerank", rerank_body(truncate_prompt_tokens=60))
    assert all(0.45 <= r["relevance_score"] < 0.55 for r in reply.json["results"])


# --------------------------------------------------------------------------------------------
# llama.cpp


async def test_llamacpp_rerank_gives_raw_logits_and_no_documents() -> None:
    async with running("llamacpp") as srv:
        reply = await post(srv.url + "/v1/rerank", rerank_body(model="nope", top_n=2, return_documents=True))
    body = reply.json
    assert list(body) == ["model", "object", "usage", "results"] and body["object"] == "list"
    assert body["model"] == "nope" and "id" not in body
    assert [set(r) for r in body["results"]] == [{"index", "relevance_score"}] * 2
    assert body["results"][0]["index"] == BEST
    assert body["results"][0]["relevance_score"] == pytest.approx(to_logit(lexical_scorer(QUERY, DOCS[BEST])))
    assert body["results"][1]["relevance_score"] < 0


@pytest.mark.parametrize("path", ["/rerank", "/reranking", "/v1/rerank", "/v1/reranking"])
async def test_llamacpp_rerank_routes_are_equivalent(path: str) -> None:
    async with running("llamacpp") as srv:
        reply = await post(srv.url + path, rerank_body())
    assert reply.status == 200 and reply.json["results"][0]["index"] == BEST


async def test_llamacpp_texts_switch_to_tei_format() -> None:
    async with running("llamacpp") as srv:
        reply = await post(srv.url + "/rerank", {"query": QUERY, "texts": DOCS[:2], "return_text": True})
    assert reply.json == [
        {"index": 1, "score": reply.json[0]["score"], "text": DOCS[1]},
        {"index": 0, "score": reply.json[1]["score"], "text": DOCS[0]},
    ]


async def test_llamacpp_request_errors() -> None:
    async with running("llamacpp") as srv:
        empty = await post(srv.url + "/rerank", {"query": "q", "documents": []})
        no_query = await post(srv.url + "/rerank", {"documents": ["d"]})
        objects = await post(srv.url + "/rerank", {"query": "q", "documents": [{"text": "d"}]})
        zero = await post(srv.url + "/rerank", rerank_body(top_n=0))
        bad_json = await post(srv.url + "/rerank", data="{x", headers={"Content-Type": "application/json"})
    assert (empty.status, empty.json) == (400, {"error": {
        "code": 400, "message": '"documents" must be a non-empty string array', "type": "invalid_request_error"}})
    assert no_query.status == 400 and no_query.json["error"]["message"] == '"query" must be provided'
    assert objects.status == 400
    assert zero.status == 200 and zero.json["results"] == []
    assert bad_json.status == 400 and bad_json.json["error"]["message"].startswith("[json.exception.parse_error.101]")


async def test_llamacpp_refuses_prompts_over_the_batch_size() -> None:
    async with running("llamacpp") as srv:
        reply = await post(srv.url + "/rerank", {"query": "q", "documents": ["short", "y" * 2812]})
    assert (reply.status, reply.json) == (500, {"error": {
        "code": 500, "message": "input (704 tokens) is too large to process. increase the physical batch "
                                "size (current batch size: 512)", "type": "server_error"}})


async def test_llamacpp_without_reranking_is_501_everywhere() -> None:
    async with running("llamacpp", reranking=False) as srv:
        replies = [await post(srv.url + path, rerank_body())
                   for path in ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking")]
        models = await get(srv.url + "/v1/models")
    for reply in replies:
        assert reply.status == 501 and reply.json["error"]["type"] == "not_supported_error"
        assert reply.json["error"]["message"] == "This server does not support reranking. Start it with `--reranking`"
    assert models.json["data"][0]["owned_by"] == "llamacpp" and "meta" in models.json["data"][0]


async def test_llamacpp_api_key_everywhere_but_public_endpoints() -> None:
    async with running("llamacpp", api_key="sekret") as srv:
        rerank = await post(srv.url + "/v1/rerank", rerank_body())
        props = await get(srv.url + "/props", key="wrong")
        unknown = await get(srv.url + "/nothing")
        public = [await get(srv.url + path) for path in ("/health", "/v1/health", "/models", "/v1/models", "/")]
        allowed = await post(srv.url + "/v1/rerank", rerank_body(), key="sekret")
    expected = {"error": {"message": "Invalid API Key", "type": "authentication_error", "code": 401}}
    assert (rerank.status, rerank.json) == (401, expected)
    assert props.status == 401 and unknown.status == 401
    assert [r.status for r in public] == [200] * 5 and public[0].json == {"status": "ok"}
    assert allowed.status == 200


async def test_llamacpp_answers_503_while_loading_except_its_listings() -> None:
    async with running("llamacpp", loading=True) as srv:
        rerank = await post(srv.url + "/v1/rerank", rerank_body())
        health = await get(srv.url + "/health")
        models = await get(srv.url + "/v1/models")
        assert isinstance(srv.protocol, LlamaCppApp)
        srv.protocol.loading = False
        loaded = await post(srv.url + "/v1/rerank", rerank_body())
    loading = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    assert (rerank.status, rerank.json) == (503, loading) and (health.status, health.json) == (503, loading)
    assert models.status == 200 and models.json["data"][0]["owned_by"] == "llamacpp"
    assert models.json["data"][0]["meta"] is None
    assert loaded.status == 200


async def test_llamacpp_probabilities_option_for_qwen3_ggufs() -> None:
    async with running("llamacpp", probabilities=True) as srv:
        reply = await post(srv.url + "/rerank", rerank_body())
    assert all(0.0 <= r["relevance_score"] <= 1.0 for r in reply.json["results"])


# --------------------------------------------------------------------------------------------
# SGLang and Ollama


async def test_sglang_bare_list_with_meta_info() -> None:
    async with running("sglang") as srv:
        reply = await post(srv.url + "/v1/rerank", rerank_body(top_n=2))
        models = await get(srv.url + "/v1/models")
    assert isinstance(reply.json, list) and len(reply.json) == 2
    assert reply.json[0]["index"] == BEST and reply.json[0]["document"] == DOCS[BEST]
    assert {"score", "document", "index", "meta_info"} == set(reply.json[0])
    assert_best_first([item["score"] for item in reply.json])
    assert models.json["data"][0]["owned_by"] == "sglang"


async def test_sglang_leaves_the_documents_out_when_asked() -> None:
    async with running("sglang") as srv:
        reply = await post(srv.url + "/v1/rerank", rerank_body(return_documents=False))
    assert all({"score", "index", "meta_info"} == set(item) for item in reply.json)


async def test_sglang_refuses_a_pair_over_its_context_length() -> None:
    async with running("sglang", context_length=512) as srv:
        reply = await post(srv.url + "/v1/rerank", {"query": "q", "documents": ["short", "y" * 2044]})
    assert (reply.status, reply.json) == (400, {
        "object": "error", "message": "The input (512 tokens) is longer than the model's context length (512 tokens).",
        "type": "BadRequestError", "param": None, "code": 400})


@pytest.mark.parametrize(("query", "documents", "message"), [
    ("", ["a"], "Query cannot be empty"),
    (" \n", ["a"], "Query cannot be empty or whitespace only"),
    ("q", ["a", ""], "Each document must be a non-empty string"),
    ("q", ["a", "\t "], "Each document cannot be empty or whitespace only"),
])
async def test_sglang_refuses_a_blank_query_or_document(query: str, documents: list[str], message: str) -> None:
    async with running("sglang") as srv:
        reply = await post(srv.url + "/v1/rerank", {"query": query, "documents": documents})
    assert (reply.status, reply.json) == (400, {
        "object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400})


async def test_ollama_has_no_rerank_but_answers_its_version() -> None:
    async with running("ollama") as srv:
        reranks = [await post(srv.url + path, rerank_body()) for path in ("/v1/rerank", "/rerank", "/api/rerank")]
        version = await get(srv.url + "/api/version")
    assert [r.status for r in reranks] == [404, 404, 404]
    assert set(version.json) == {"version"}


# --------------------------------------------------------------------------------------------
# instrumentation: recording, gate, faults, threads


async def test_requests_are_recorded_and_counted() -> None:
    async with running("vllm") as srv:
        await post(srv.url + "/rerank", rerank_body(), headers={"X-Trace": "1"})
        await post(srv.url + "/rerank", data="not json", headers={"Content-Type": "application/json"})
        await get(srv.url + "/v1/models?x=1")
    first, second, third = srv.requests
    assert (first.method, first.path, first.json) == ("POST", "/rerank", rerank_body())
    assert first.headers["x-trace"] == "1" and json.loads(first.text) == rerank_body()
    assert (second.json, second.text) == (None, "not json")
    assert (third.method, third.query) == ("GET", {"x": "1"})
    assert (srv.count("/rerank"), srv.count("/v1/models"), srv.count()) == (2, 1, 3)
    srv.reset()
    assert (srv.count(), srv.requests) == (0, [])


async def test_gate_holds_requests_in_flight_and_releases_them_in_order() -> None:
    async with running("tei") as srv, aiohttp.ClientSession() as session:
        srv.gate.hold()

        async def send() -> int:
            async with session.post(srv.url + "/rerank", json={"query": "q", "texts": ["t"]}) as response:
                return response.status

        tasks = [asyncio.create_task(send()) for _ in range(3)]
        await srv.gate.wait_held(3)
        assert (srv.in_flight, srv.gate.held) == (3, 3)
        srv.gate.release(1)
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        assert [t.result() for t in done] == [200] and srv.gate.held == 2
        srv.gate.release()
        assert await asyncio.gather(*tasks) == [200, 200, 200]
        await srv.wait_until(lambda s: s.in_flight == 0)
    assert srv.max_in_flight == 3 and srv.gate.is_open


async def test_gate_permits_carry_over_and_match_filters() -> None:
    async with running("vllm") as srv:
        srv.gate.hold(match=lambda r: r.method == "POST")
        health = await get(srv.url + "/health")
        srv.gate.release(1)  # no one waiting: the permit is kept for the next request
        permitted = await post(srv.url + "/rerank", rerank_body())
        assert health.status == 200 and permitted.status == 200 and not srv.gate.is_open
        srv.gate.release()


async def test_close_releases_held_and_hanging_requests() -> None:
    srv = await start_server("infinity")
    srv.set_fault(lambda r: Hang() if r.path == "/rerank" else None)
    async with aiohttp.ClientSession() as session:
        hanging = asyncio.create_task(session.post(srv.url + "/rerank", json=rerank_body()))
        await srv.wait_until(lambda s: s.in_flight == 1)
        srv.gate.hold()
        held = asyncio.create_task(session.get(srv.url + "/models"))
        await srv.gate.wait_held(1)
        await srv.close()
        for task in (hanging, held):
            with pytest.raises(aiohttp.ClientError):
                await task
    assert srv.in_flight == 0 and srv.max_in_flight == 2


async def test_hang_ends_when_the_client_disconnects() -> None:
    async with running("tei") as srv, aiohttp.ClientSession() as session:
        srv.set_fault(Hang())
        request = asyncio.create_task(session.post(srv.url + "/rerank", json={}))
        await srv.wait_until(lambda s: s.in_flight == 1)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        await srv.wait_until(lambda s: s.in_flight == 0)


async def test_respond_fault_overrides_status_body_and_type() -> None:
    async with running("vllm") as srv:
        srv.set_fault(lambda r: Respond(503, {"error": "busy"}) if r.path == "/rerank" else None)
        faulted = await post(srv.url + "/rerank", rerank_body())
        untouched = await get(srv.url + "/version")
        srv.set_fault(Respond(429, "slow down", content_type="text/plain", headers={"Retry-After": "1"}))
        text = await get(srv.url + "/version")
        srv.set_fault(None)
        cleared = await post(srv.url + "/rerank", rerank_body())
    assert (faulted.status, faulted.json, faulted.content_type) == (503, {"error": "busy"}, "application/json")
    assert untouched.status == 200 and cleared.status == 200
    assert (text.status, text.text, text.headers["Retry-After"]) == (429, "slow down", "1")


async def test_delay_fault_answers_normally_afterwards() -> None:
    async with running("tei") as srv:
        srv.set_fault(Delay(0.01))
        reply = await post(srv.url + "/rerank", {"query": "q", "texts": ["t"]})
    assert reply.status == 200 and reply.json[0]["index"] == 0


async def test_stall_body_sends_headers_then_nothing() -> None:
    async with running("tei") as srv, aiohttp.ClientSession() as session:
        srv.set_fault(StallBody(partial=b"[{"))
        async with session.post(srv.url + "/rerank", json={}) as response:
            assert response.status == 200 and response.content_type == "application/json"
            assert await response.content.readexactly(2) == b"[{"
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(response.content.read(1), 0.05)


@pytest.mark.parametrize("chunked", [False, True])
async def test_sized_body_has_exactly_n_bytes(chunked: bool) -> None:
    async with running("vllm") as srv, aiohttp.ClientSession() as session:
        srv.set_fault(SizedBody(300_000, chunked=chunked))
        async with session.post(srv.url + "/rerank", json={}) as response:
            body = await response.read()
            length = response.headers.get("Content-Length")
    assert len(body) == 300_000 and length == (None if chunked else "300000")


async def test_disconnect_and_invalid_json_faults() -> None:
    async with running("infinity") as srv:
        srv.set_fault(Disconnect())
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await post(srv.url + "/rerank", rerank_body())
        srv.set_fault(InvalidJson())
        reply = await post(srv.url + "/rerank", rerank_body())
    assert reply.status == 200 and reply.content_type == "application/json"
    with pytest.raises(json.JSONDecodeError):
        _ = reply.json


async def test_redirect_fault() -> None:
    async with running("infinity") as srv:
        srv.set_fault(lambda r: Redirect("/health") if r.path == "/models" else None)
        reply = await get(srv.url + "/models")
        async with aiohttp.ClientSession() as session, session.get(srv.url + "/models") as followed:
            landed = await followed.json()
    assert (reply.status, reply.headers["Location"]) == (307, "/health")
    assert "unix" in landed and srv.count("/health") == 1


async def test_wait_until_sync_refuses_to_block_the_servers_loop() -> None:
    async with running("tei") as srv:
        with pytest.raises(RuntimeError):
            srv.wait_until_sync(lambda s: True)


def _sync_post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()


def test_serve_in_thread_for_sync_tests() -> None:
    with serve_in_thread("vllm", error_style="old") as srv:
        status, body = _sync_post(srv.url + "/score", {"text_1": QUERY, "text_2": DOCS})
        assert status == 200 and [d["index"] for d in body["data"]] == [0, 1, 2]
        srv.gate.hold()
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(_sync_post(srv.url + "/rerank", rerank_body())[0]))
                   for _ in range(2)]
        for thread in threads:
            thread.start()
        srv.gate.wait_held_sync(2)
        srv.wait_until_sync(lambda s: s.in_flight == 2)
        srv.gate.release()
        for thread in threads:
            thread.join(10)
        assert results == [200, 200] and srv.max_in_flight == 2 and srv.count("/rerank") == 2
        url = srv.url
    with pytest.raises(urllib.error.URLError):
        _sync_post(url + "/score", {"text_1": "a", "text_2": "b"})
