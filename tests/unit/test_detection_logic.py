"""Pure detection: who a server is from its GETs, what to probe, and which probe result wins."""

from __future__ import annotations

import pytest

from usr.plugins.a0_reranker.core import detection as det
from usr.plugins.a0_reranker.core.dialects import catalog as cat
from usr.plugins.a0_reranker.core.errors import DetectionFailed
from usr.plugins.a0_reranker.core.scores import RAW, normalize

TEI_INFO = {"model_id": "BAAI/bge-reranker-base", "model_type": {"reranker": {"id2label": {"0": "LABEL_0"}}},
            "max_client_batch_size": 16, "version": "1.9.3"}
VLLM_MODELS = {"object": "list", "data": [{"id": "a0-reranker", "object": "model", "owned_by": "vllm"}]}
INFINITY_MODELS = {"object": "list", "data": [{"id": "minilm-l6-ce", "owned_by": "infinity", "capabilities": ["rerank"]},
                                              {"id": "embed", "owned_by": "infinity", "capabilities": ["embed"]}]}
LLAMA_MODELS = {"object": "list", "data": [{"id": "qwen3-reranker.gguf", "owned_by": "llamacpp"}]}


def test_tei_is_known_by_its_info_and_its_limit_is_read() -> None:
    identity = det.identify({"/info": TEI_INFO, "/v1/models": None})
    assert (identity.kind, identity.max_client_batch, identity.models) == ("tei", 16, ("BAAI/bge-reranker-base",))
    [[dialect]] = det.candidates(identity, "auto", "i")
    assert (dialect.name, dialect.path, dialect.max_pairs) == ("tei", "/rerank", 16)


@pytest.mark.parametrize(("permits", "texts"), [(8, 8), (16, 16), (512, 16), (None, 16), (True, 16)])
def test_a_tei_request_carries_no_more_texts_than_its_permits(permits: object, texts: int) -> None:
    """Each text holds one of ``--max-concurrent-requests`` permits: a request with more would be refused 429
    Overloaded every time it went, so the smaller of the two limits caps a request."""
    identity = det.identify({"/info": {**TEI_INFO, "max_concurrent_requests": permits}})
    [[dialect]] = det.candidates(identity, "auto", "i")
    assert identity.max_client_batch == dialect.max_pairs == texts


@pytest.mark.parametrize("limit", [True, False, 0, -16, 16.0, "16", None])
def test_a_tei_batch_limit_that_is_no_positive_whole_number_is_ignored(limit: object) -> None:
    """JSON ``true`` is an int in Python: read as 1, it capped every request at one pair."""
    identity = det.identify({"/info": {**TEI_INFO, "max_client_batch_size": limit}})
    assert (identity.kind, identity.max_client_batch) == ("tei", None)
    [[dialect]] = det.candidates(identity, "auto", "i")
    assert dialect.max_pairs == cat.tei_dialect(None).max_pairs


def test_tei_serving_an_embedding_model_is_refused_with_a_reason() -> None:
    info = {**TEI_INFO, "model_type": {"embedding": {"pooling": "cls"}}}
    with pytest.raises(DetectionFailed, match="embedding model, not a reranker"):
        det.candidates(det.identify({"/info": info}), "auto", "i")


def test_vllm_competes_rerank_against_qwen3_score() -> None:
    identity = det.identify({"/v1/models": VLLM_MODELS})
    assert (identity.kind, identity.default_model) == ("vllm", "a0-reranker")
    groups = det.candidates(identity, "auto", "i")
    assert [[d.path for d in g] for g in groups] == [["/rerank"], ["/score", "/v1/score"]]
    assert [[d.path for d in g] for g in det.candidates(identity, "qwen3_score", "i")] == [["/score", "/v1/score"]]
    assert [[d.path for d in g] for g in det.candidates(identity, "rerank", "i")] == [["/rerank"]]


def test_infinity_prefix_and_rerank_capable_models() -> None:
    plain = det.identify({"/v1/models": None, "/models": INFINITY_MODELS})
    assert (plain.kind, plain.url_prefix, plain.models) == ("infinity", "", ("minilm-l6-ce",))
    prefixed = det.identify({"/v1/models": INFINITY_MODELS})
    assert det.candidates(prefixed, "auto", "i")[0][0].path == "/v1/rerank"


def test_llamacpp_ollama_and_unknown() -> None:
    assert det.identify({"/v1/models": LLAMA_MODELS}).kind == "llamacpp"
    with pytest.raises(DetectionFailed, match="Ollama"):
        det.candidates(det.identify({"/api/version": {"version": "0.9.0"}}), "auto", "i")
    unknown = det.identify({})
    paths = [d.path for d in det.candidates(unknown, "auto", "i")[0]]
    assert paths[:3] == ["/v1/rerank", "/rerank", "/v2/rerank"] and "/v1/reranking" in paths


def test_hosted_apis_are_known_by_host() -> None:
    assert det.hosted_kind("https://api.cohere.com") == "cohere"
    assert det.hosted_kind("https://api.voyageai.com") == "voyage"
    assert det.hosted_kind("http://10.0.0.5:8002") is None
    groups = det.candidates(det.ServerIdentity(kind="cohere"), "auto", "i")
    assert [d.name for d in groups[0]] == ["cohere-v2", "cohere-v1"]


def outcome(dialect, scores):  # type: ignore[no-untyped-def]
    return det.ProbeOutcome(dialect, scores=tuple(scores))


def test_judge_prefers_the_widest_correct_margin() -> None:
    qwen = cat.qwen3_score_dialects("i")[0]
    garbage_but_lucky = outcome(cat.VLLM_RERANK, [0.52, 0.51, 0.50, 0.49])
    templated = outcome(qwen, [0.99, 0.97, 0.001, 0.002])
    assert det.judge([garbage_but_lucky, templated]).dialect is qwen


def test_judge_refuses_a_server_that_ranks_wrongly() -> None:
    wrong = outcome(cat.VLLM_RERANK, [0.2, 0.9, 0.8, 0.1])
    with pytest.raises(DetectionFailed, match="ranks an obvious relevant/irrelevant probe wrongly"):
        det.judge([wrong, det.ProbeOutcome(cat.qwen3_score_dialects("i")[0], error="HTTP 404")])
    with pytest.raises(DetectionFailed, match="no reranker API answered"):
        det.judge([det.ProbeOutcome(cat.VLLM_RERANK, error="refused")])


def test_logits_are_compared_on_the_probability_scale() -> None:
    logits = outcome(cat.LLAMACPP, [2.4, 2.0, 0.46, -3.0])
    assert logits.ranks_correctly
    assert 0 < logits.margin < 1
    assert normalize([0.2, 0.9], RAW) == [0.2, 0.9]
    assert normalize([-800.0, 800.0], RAW) == [0.0, 1.0]


def test_a_tiny_margin_is_not_enough() -> None:
    assert not outcome(cat.VLLM_RERANK, [0.501, 0.502, 0.5, 0.499]).ranks_correctly
