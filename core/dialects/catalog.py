"""Every dialect we speak, by server. Routes, fields and limits are each server's own: Cohere's API
reference (docs.cohere.com/reference/rerank), Jina's (jina.ai/reranker), Infinity's OpenAPI schema
(michaelfeil/infinity, ``fastapi_schemas/pymodels.py``), TEI's (huggingface/text-embeddings-inference,
``docs/openapi.json``), vLLM's pooling API (docs.vllm.ai, "Score API" and "Re-rank API"), llama.cpp's
``tools/server/README.md``, and the Voyage, Mixedbread, Together, SiliconFlow and SGLang API references.

``Qwen3ScoreDialect`` and vLLM's ``/rerank`` are built per instruction (the one renders it into the text
it sends, the other sends it for the server's template: a vLLM started with the Qwen3-Reranker template
renders the judge prompt itself, with that line); the others are constants. llama.cpp, SGLang and
unidentified servers return the model's raw output, which may be logits or probabilities: their routes
settle it from the probe (core.scores).
"""

from __future__ import annotations

from typing import Final

from ..scores import RAW
from .qwen3_score import Qwen3ScoreDialect
from .wire import TEI_DEFAULT_MAX_CLIENT_BATCH, RerankDialect, TeiDialect

UNLIMITED: Final = 100_000  # servers without a documented per-request limit; the batcher's setting governs

COHERE_V2: Final = RerankDialect("cohere-v2", "/v2/rerank", max_pairs=1000, requires_model=True)
COHERE_V1: Final = RerankDialect("cohere-v1", "/v1/rerank", extra={"return_documents": False}, max_pairs=1000)
JINA: Final = RerankDialect("jina", "/v1/rerank", extra={"return_documents": False}, max_pairs=1000)
VOYAGE: Final = RerankDialect("voyage", "/v1/rerank", extra={"return_documents": False}, max_pairs=1000)
MIXEDBREAD: Final = RerankDialect(
    "mixedbread", "/v1/reranking", documents_key="input", extra={"return_input": False}, max_pairs=1000
)
VLLM_RERANK: Final = RerankDialect("vllm", "/rerank", max_pairs=UNLIMITED, takes_instruction=True)
LLAMACPP: Final = RerankDialect("llamacpp", "/v1/rerank", max_pairs=UNLIMITED, score_scale=RAW)
SGLANG: Final = RerankDialect("sglang", "/v1/rerank", max_pairs=UNLIMITED, score_scale=RAW)

# Servers we could not identify: the plain body every member of the family accepts, on each route.
GENERIC_RERANK: Final = (
    RerankDialect("rerank", "/v1/rerank", max_pairs=UNLIMITED, score_scale=RAW),
    RerankDialect("rerank", "/rerank", max_pairs=UNLIMITED, score_scale=RAW),
    RerankDialect("rerank", "/v2/rerank", max_pairs=UNLIMITED, score_scale=RAW),
)


def vllm_rerank_dialect(instruction: str) -> RerankDialect:
    """vLLM's ``/rerank`` carrying ``rerank_instruction``: a server-side score template (Qwen3-Reranker
    started with ``--chat-template``) renders it; without such a template vLLM ignores the field."""
    return VLLM_RERANK.with_instruction(instruction)


def infinity_dialect(url_prefix: str = "") -> RerankDialect:
    """Infinity's routes carry its ``--url-prefix`` (empty by default, so ``/rerank``)."""
    return RerankDialect("infinity", f"{url_prefix}/rerank", extra={"return_documents": False}, max_pairs=2048)


def tei_dialect(max_client_batch: int | None = None) -> TeiDialect:
    return TeiDialect(max_pairs=max_client_batch or TEI_DEFAULT_MAX_CLIENT_BATCH)


def qwen3_score_dialects(instruction: str) -> tuple[Qwen3ScoreDialect, Qwen3ScoreDialect]:
    """``/score`` (canonical since vLLM v0.7) and ``/v1/score`` (older builds only have this one)."""
    return Qwen3ScoreDialect(instruction), Qwen3ScoreDialect(instruction, path="/v1/score")
