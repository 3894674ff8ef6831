"""Dialects on recorded answers (answers captured from real servers and documented shapes): requests, parsing, errors."""

from __future__ import annotations

import json
import math

import pytest

from usr.plugins.a0_reranker.core.dialects import ScoreBatch, WireAnswer
from usr.plugins.a0_reranker.core.dialects import catalog as cat
from usr.plugins.a0_reranker.core.errors import InputTooLong, MalformedAnswer, ServerError

GERMANY = "What is the capital city of Germany?"
DOCS = ["Bananas are rich in potassium.", "Berlin is the capital of Germany.", "The Nile is a river in Africa."]
BATCH = ScoreBatch.single(GERMANY, DOCS)


def answer(body: object, status: int = 200, content_type: str = "application/json") -> WireAnswer:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return WireAnswer(status=status, body=raw, content_type=content_type)


# Captured from Infinity 0.0.78 (infinity-emb) on loopback.
INFINITY_ANSWER = {
    "object": "rerank",
    "results": [
        {"relevance_score": 0.9036588072776794, "index": 1, "document": None},
        {"relevance_score": 0.5683432817459106, "index": 0, "document": None},
        {"relevance_score": 0.40723520517349243, "index": 2, "document": None},
    ],
    "model": "minilm-l6-ce", "usage": {"prompt_tokens": 201, "total_tokens": 201},
    "id": "infinity-fe2cb50f", "created": 1796025603,
}
# vLLM 0.32.0 /v1/rerank always returns documents as objects.
VLLM_ANSWER = {
    "id": "score-bb63aa17c7120fa1", "model": "minilm-l6-ce", "usage": {"prompt_tokens": 54, "total_tokens": 54},
    "results": [
        {"index": 1, "document": {"text": DOCS[1], "multi_modal": None}, "relevance_score": 0.903658926486969},
        {"index": 0, "document": {"text": DOCS[0], "multi_modal": None}, "relevance_score": 0.5683432221412659},
        {"index": 2, "document": {"text": DOCS[2], "multi_modal": None}, "relevance_score": 0.4072},
    ],
}
# llama.cpp answers with raw logits and no id/document.
LLAMACPP_ANSWER = {
    "model": "minilm-l6-ce", "object": "list", "usage": {"prompt_tokens": 54, "total_tokens": 54},
    "results": [{"index": 1, "relevance_score": 2.4006431102752686}, {"index": 0, "relevance_score": 0.46648120880126953},
                {"index": 2, "relevance_score": -1.5}],
}
TEI_ANSWER = [{"index": 1, "score": 0.97}, {"index": 0, "score": 0.12}, {"index": 2, "score": 0.01}]
VOYAGE_ANSWER = {"object": "list", "data": [{"relevance_score": 0.9, "index": 1}, {"relevance_score": 0.2, "index": 2},
                                            {"relevance_score": 0.1, "index": 0}], "model": "rerank-2.5",
                 "usage": {"total_tokens": 30}}
MIXEDBREAD_ANSWER = {"data": [{"index": 1, "score": 0.9, "object": "rank_result"},
                              {"index": 0, "score": 0.3, "object": "rank_result"},
                              {"index": 2, "score": 0.2, "object": "rank_result"}],
                     "model": "mxbai", "object": "list", "top_k": 3, "return_input": False}
COHERE_ANSWER = {"id": "x", "results": [{"index": 1, "relevance_score": 0.98}, {"index": 2, "relevance_score": 0.1},
                                        {"index": 0, "relevance_score": 0.05}],
                 "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}


@pytest.mark.parametrize(
    ("dialect", "body", "expected"),
    [
        (cat.infinity_dialect(), INFINITY_ANSWER, [0.5683432817459106, 0.9036588072776794, 0.40723520517349243]),
        (cat.VLLM_RERANK, VLLM_ANSWER, [0.5683432221412659, 0.903658926486969, 0.4072]),
        (cat.LLAMACPP, LLAMACPP_ANSWER, [0.46648120880126953, 2.4006431102752686, -1.5]),
        (cat.tei_dialect(32), TEI_ANSWER, [0.12, 0.97, 0.01]),
        (cat.VOYAGE, VOYAGE_ANSWER, [0.1, 0.9, 0.2]),
        (cat.MIXEDBREAD, MIXEDBREAD_ANSWER, [0.3, 0.9, 0.2]),
        (cat.COHERE_V2, COHERE_ANSWER, [0.05, 0.98, 0.1]),
    ],
)
def test_sorted_answers_come_back_in_input_order(dialect, body, expected) -> None:  # type: ignore[no-untyped-def]
    assert dialect.parse(answer(body), BATCH) == expected


def test_request_bodies_follow_each_protocol() -> None:
    assert cat.tei_dialect(32).build(BATCH, "ignored").body == {
        "query": GERMANY, "texts": DOCS, "truncate": True, "raw_scores": False, "return_text": False}
    assert cat.COHERE_V2.build(BATCH, "rerank-v3.5").body == {"model": "rerank-v3.5", "query": GERMANY, "documents": DOCS}
    assert cat.VOYAGE.build(BATCH, "").body == {"query": GERMANY, "documents": DOCS, "return_documents": False}
    assert cat.MIXEDBREAD.build(BATCH, "m").body == {"model": "m", "query": GERMANY, "input": DOCS, "return_input": False}
    request = cat.infinity_dialect("/v1").build(BATCH, "")
    assert (request.method, request.path) == ("POST", "/v1/rerank")
    assert "model" not in request.body


def test_rerank_family_refuses_several_queries_in_one_request() -> None:
    batch = ScoreBatch(queries=("a", "b"), pairs=((0, "x"), (1, "y")))
    with pytest.raises(ValueError, match="one query"):
        cat.VLLM_RERANK.build(batch, "")


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}], "expected 3 results, got 2"),
        ([{"index": 0, "score": 1}, {"index": 0, "score": 2}, {"index": 1, "score": 3}], "appears twice"),
        ([{"index": 0, "score": 1}, {"index": 1, "score": 2}, {"index": 3, "score": 3}], "out of range"),
        ([{"index": 0, "score": 1}, {"index": 1, "score": 2}, {"index": True, "score": 3}], "out of range"),
        ([{"index": 0, "score": 1}, {"index": 1, "score": "x"}, {"index": 2, "score": 3}], "not a finite number"),
        ([{"index": 0, "score": 1}, {"index": 1}, {"index": 2, "score": 3}], "has no score"),
        ({"index": 0}, "expected a list"),
    ],
)
def test_malformed_results_are_errors_not_guesses(items: object, problem: str) -> None:
    with pytest.raises(MalformedAnswer, match=problem):
        cat.tei_dialect().parse(answer(items), BATCH)


def test_non_finite_scores_are_refused() -> None:
    body = b'[{"index":0,"score":NaN},{"index":1,"score":1},{"index":2,"score":Infinity}]'
    with pytest.raises(MalformedAnswer, match="finite"):
        cat.tei_dialect().parse(answer(body), BATCH)
    assert math.isnan(float("nan"))


def test_html_and_broken_json_with_200_are_malformed() -> None:
    with pytest.raises(MalformedAnswer, match="not JSON"):
        cat.VLLM_RERANK.parse(answer(b"<html>proxy</html>", content_type="text/html"), BATCH)
    with pytest.raises(MalformedAnswer, match="neither 'results' nor 'data'"):
        cat.VLLM_RERANK.parse(answer({"ok": True}), BATCH)


@pytest.mark.parametrize(
    ("status", "body", "content_type", "message"),
    [
        (400, {"error": {"message": "The model `nope` does not exist.", "type": "NotFoundError", "param": None,
                         "code": 404}}, "application/json", "The model `nope` does not exist."),
        (401, {"message": "invalid api token"}, "application/json", "invalid api token"),
        (422, {"error": "batch size 40 > maximum allowed batch size 32", "error_type": "Validation"},
         "application/json", "batch size 40 > maximum allowed batch size 32 (Validation)"),
        (422, {"detail": [{"type": "too_short", "loc": ["body", "documents"], "msg": "List should have at least 1 item"}]},
         "application/json", "documents: List should have at least 1 item"),
        (404, {"detail": "Not Found"}, "application/json", "Not Found"),
        (404, b"", "", "not found"),
        (401, b"", "", "unauthorized: check the API key"),
        (422, b"Failed to deserialize the JSON body into the target type: missing field `texts`", "text/plain",
         "Failed to deserialize the JSON body into the target type: missing field `texts`"),
        (502, b"<html><body>Bad gateway</body></html>", "text/html", "an HTML page instead of an API answer"),
        (400, {"object": "error", "message": "old vllm says no", "type": "BadRequestError", "code": 400},
         "application/json", "old vllm says no"),
    ],
)
def test_each_servers_error_body_becomes_its_message(status, body, content_type, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ServerError) as caught:
        cat.VLLM_RERANK.parse(answer(body, status, content_type), BATCH)
    assert caught.value.status == status
    assert caught.value.message == message
    assert not isinstance(caught.value, InputTooLong)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"error": {"message": "This model's maximum context length is 512 tokens. However, your prompt contains "
                                    "at least 513 input tokens.", "type": "BadRequestError", "param": "input_tokens",
                         "code": 400}}),
        (500, {"error": {"code": 500, "message": "input (704 tokens) is too large to process. increase the physical "
                                                 "batch size (current batch size: 512)", "type": "server_error"}}),
        (413, b""),
    ],
)
def test_too_long_input_is_recognised(status: int, body: object) -> None:
    with pytest.raises(InputTooLong):
        cat.LLAMACPP.parse(answer(body, status), BATCH)


def test_voyage_requests_are_cut_to_its_token_cap_counting_each_pair_s_query() -> None:
    """Voyage counts query tokens once per document (docs.voyageai.com/reference/reranker-api); a CJK character
    is at least a token, so each part's characters, query included per pair, must fit the budget."""
    from usr.plugins.a0_reranker.core.dialects.wire import token_parts

    batch = ScoreBatch.single("备份" * 50, ["记忆内容" * 250] * 40 + ["长" * 5000])
    legacy = cat.sized_for(cat.VOYAGE, "rerank-1").max_request_tokens
    assert legacy is not None
    parts = token_parts(batch, legacy // 100)  # 3,000 tokens a request
    assert [pair for part in parts for pair in part.pairs] == list(batch.pairs)  # in order, each once
    assert all(sum(100 + len(doc) for doc in part.documents) <= 3000 for part in parts[:-1])
    assert parts[-1].documents == ["长" * 5000]  # over the budget alone: sent alone (the server truncates it)
    assert token_parts(batch, None) == [batch]
    assert cat.sized_for(cat.VOYAGE, "rerank-2.5").max_request_tokens == 600_000
    assert cat.sized_for(cat.COHERE_V2, "rerank-v3.5").max_request_tokens is None
