"""Every dialect we speak, by server. Routes, fields and limits are each server's own: Cohere's API reference
(docs.cohere.com/reference/rerank), Jina's (jina.ai/reranker), Infinity's OpenAPI schema (michaelfeil/infinity,
``fastapi_schemas/pymodels.py``), TEI's (huggingface/text-embeddings-inference, ``docs/openapi.json``), vLLM's
pooling API (docs.vllm.ai), llama.cpp's ``tools/server/README.md``, and the Voyage, Mixedbread, Together,
SiliconFlow and SGLang API references.

``Qwen3ScoreDialect`` renders Qwen3-Reranker's template itself (why: docs/servers.md and vLLM PR #19260): vLLM
joins ``text_1`` and ``text_2`` into the QwenLM/Qwen3-Embedding README's prompt, byte for byte. User text is
concatenated, never passed through ``str.format``, so braces, ``%s`` and newlines stay as they are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from ..errors import MalformedAnswer
from ..scores import PROBABILITY, RAW, ScoreScale
from .wire import RerankDialect, ScoreBatch, WireAnswer, WireRequest, read_success_json, scores_from_items

PREFIX: Final = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
SUFFIX: Final = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
UNLIMITED: Final = 100_000  # servers without a documented per-request limit; the batcher's setting governs


def query_text(query: str, instruction: str) -> str:
    """vLLM's ``text_1``: system turn, instruction and query."""
    return PREFIX + "<Instruct>: " + instruction + "\n<Query>: " + query + "\n"


def document_text(document: str) -> str:
    """vLLM's ``text_2``: the document and the assistant turn to judge."""
    return "<Document>: " + document + SUFFIX


@dataclass(frozen=True)
class Qwen3ScoreDialect:
    instruction: str
    name: str = "qwen3_score"
    path: str = "/score"
    max_pairs: int = UNLIMITED
    api: str = "qwen3_score"
    mixes_queries: bool = True
    score_scale: ScoreScale = PROBABILITY  # P(yes): vLLM's sigmoid of the (yes - no) logit
    max_request_tokens: int | None = None

    def with_instruction(self, instruction: str) -> Qwen3ScoreDialect:
        return dataclasses.replace(self, instruction=instruction)

    def build(self, batch: ScoreBatch, model: str) -> WireRequest:
        templated = [query_text(query, self.instruction) for query in batch.queries]
        # 1:N, the smallest body, or N:N
        text_1: str | list[str] = templated[0] if len(templated) == 1 else [templated[qi] for qi, _ in batch.pairs]
        body: dict[str, Any] = {"model": model} if model else {}
        body |= {"text_1": text_1, "text_2": [document_text(doc) for _, doc in batch.pairs]}
        return WireRequest("POST", self.path, body)

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]:
        data = read_success_json(answer)
        if not isinstance(data, dict) or "data" not in data:
            raise MalformedAnswer("a /score answer must be an object with 'data'")
        return scores_from_items(data["data"], len(batch), ("score",))


Dialect = RerankDialect | Qwen3ScoreDialect  # how one family of servers wants pairs sent and how it answers

COHERE_V2: Final = RerankDialect("cohere-v2", "/v2/rerank", max_pairs=1000, requires_model=True)
COHERE_V1: Final = RerankDialect("cohere-v1", "/v1/rerank", extra={"return_documents": False}, max_pairs=1000)
JINA: Final = RerankDialect("jina", "/v1/rerank", extra={"return_documents": False}, max_pairs=1000)
# Voyage caps "query tokens x documents + all document tokens" at 600K, 300K for its legacy models, whatever
# ``truncation`` says (docs.voyageai.com/reference/reranker-api): a large recall of long memories is split to it
# Voyage and Mixedbread refuse a request without ``model`` (docs.voyageai.com/reference/reranker-api,
# mixedbread.com/api-reference/endpoints/reranking): without one set, the route is passed over, and the user told
VOYAGE: Final = RerankDialect("voyage", "/v1/rerank", extra={"return_documents": False}, max_pairs=1000,
                              max_request_tokens=600_000, requires_model=True)
_VOYAGE_LEGACY: Final = frozenset({"rerank-1", "rerank-lite-1"})
MIXEDBREAD: Final = RerankDialect(
    "mixedbread", "/v1/reranking", documents_key="input", extra={"return_input": False}, max_pairs=1000,
    requires_model=True,
)
VLLM_RERANK: Final = RerankDialect("vllm", "/rerank", max_pairs=UNLIMITED, takes_instruction=True)
LLAMACPP: Final = RerankDialect("llamacpp", "/v1/rerank", max_pairs=UNLIMITED, score_scale=RAW)
# SGLang echoes every document back unless told not to (``return_documents`` defaults to true)
SGLANG: Final = RerankDialect("sglang", "/v1/rerank", extra={"return_documents": False}, max_pairs=UNLIMITED,
                              score_scale=RAW)
# TEI refuses more than its ``max_client_batch_size`` texts (32 by default; ``GET /info`` says), has no
# ``model`` field and answers a bare list; it truncates over-long input itself, and applies the sigmoid.
TEI: Final = RerankDialect("tei", "/rerank", documents_key="texts", max_pairs=32, takes_model=False, results_keys=(),
                           score_keys=("score",), extra={"truncate": True, "raw_scores": False, "return_text": False})

# Servers we could not identify: the plain body every member of the family accepts, on each route.
GENERIC_RERANK: Final = tuple(RerankDialect("rerank", path, max_pairs=UNLIMITED, score_scale=RAW)
                              for path in ("/v1/rerank", "/rerank", "/v2/rerank"))
# Together and SiliconFlow, known by host name, serve that body on /v1/rerank alone (their API references)
TOGETHER: Final = dataclasses.replace(GENERIC_RERANK[0], name="together")
SILICONFLOW: Final = dataclasses.replace(GENERIC_RERANK[0], name="siliconflow")


def sized_for(dialect: Dialect, model: str) -> Dialect:
    """``dialect`` with the token cap of a request with ``model`` (``wire.token_parts``): Voyage's legacy models
    take half of what the others do."""
    if dialect.name == "voyage" and model in _VOYAGE_LEGACY and dialect.max_request_tokens:
        return dataclasses.replace(dialect, max_request_tokens=dialect.max_request_tokens // 2)
    return dialect


def infinity_dialect(url_prefix: str = "") -> RerankDialect:
    """Infinity's routes carry its ``--url-prefix`` (empty by default, so ``/rerank``)."""
    return RerankDialect("infinity", f"{url_prefix}/rerank", extra={"return_documents": False}, max_pairs=2048)


def tei_dialect(max_client_batch: int | None = None) -> RerankDialect:
    return dataclasses.replace(TEI, max_pairs=max_client_batch or TEI.max_pairs)


def qwen3_score_dialects(instruction: str) -> tuple[Qwen3ScoreDialect, Qwen3ScoreDialect]:
    """``/score`` (canonical since vLLM v0.7) and ``/v1/score`` (older builds only have this one)."""
    return Qwen3ScoreDialect(instruction), Qwen3ScoreDialect(instruction, path="/v1/score")
