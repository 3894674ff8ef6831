"""Every dialect we speak, by server, and the protocol they share (``Dialect``). Routes, fields and
limits are each server's own: Cohere's API reference (docs.cohere.com/reference/rerank), Jina's
(jina.ai/reranker), Infinity's OpenAPI schema (michaelfeil/infinity, ``fastapi_schemas/pymodels.py``),
TEI's (huggingface/text-embeddings-inference, ``docs/openapi.json``), vLLM's pooling API (docs.vllm.ai,
"Score API" and "Re-rank API"), llama.cpp's ``tools/server/README.md``, and the Voyage, Mixedbread,
Together, SiliconFlow and SGLang API references.

Most servers are of the ``/rerank`` family (``RerankDialect``), which takes ``query`` + a list of
documents and answers with scored indices: Cohere (v1, v2), Jina, Infinity, vLLM, llama.cpp, SGLang and
the Cohere-compatible services. They differ in the route, the name of the documents field, a few
optional fields, the container of the results (``results``, ``data`` or a bare list) and the name of
the score. Requests carry one query each (the servers score one query against many documents). TEI
(``TeiDialect``) is a cousin with its own fields and a per-request limit from its ``/info``.

``Qwen3ScoreDialect`` and vLLM's ``/rerank`` are built per instruction (the one renders it into the text
it sends, the other sends it for the server's template: a vLLM started with the Qwen3-Reranker template
renders the judge prompt itself, with that line); the others are constants. llama.cpp, SGLang and
unidentified servers return the model's raw output, which may be logits or probabilities: their routes
settle it from the probe (core.scores).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..errors import MalformedAnswer
from ..scores import PROBABILITY, RAW, ScoreScale
from .qwen3_score import Qwen3ScoreDialect
from .wire import ScoreBatch, WireAnswer, WireRequest, read_success_json, scores_from_items

UNLIMITED: Final = 100_000  # servers without a documented per-request limit; the batcher's setting governs
TEI_DEFAULT_MAX_CLIENT_BATCH: Final = 32
_SCORE_KEYS: Final = ("relevance_score", "score")


class Dialect(Protocol):
    """A wire dialect: how one family of servers wants pairs sent and how it answers."""

    @property
    def name(self) -> str: ...

    @property
    def api(self) -> str: ...  # ``rerank`` or ``qwen3_score``: the rerank_api setting this dialect serves

    @property
    def path(self) -> str: ...

    @property
    def mixes_queries(self) -> bool: ...  # True when one request may carry pairs of different queries

    @property
    def max_pairs(self) -> int: ...  # the server's own per-request limit

    @property
    def score_scale(self) -> ScoreScale: ...  # probabilities, logits, or the model's raw output (core.scores)

    @property
    def instruction(self) -> str: ...  # the one it sends or renders ("" when none): requests with another differ

    def with_instruction(self, instruction: str) -> Dialect:
        """This dialect carrying ``instruction`` where it sends or renders one; itself otherwise."""
        ...

    def build(self, batch: ScoreBatch, model: str) -> WireRequest: ...

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]: ...


@dataclass(frozen=True)
class RerankDialect:
    """One member of the family: its route, documents field and the extra fields worth sending."""

    name: str
    path: str
    documents_key: str = "documents"
    extra: Mapping[str, Any] = field(default_factory=dict)
    max_pairs: int = 1000
    requires_model: bool = False
    api: str = "rerank"
    mixes_queries: bool = False
    score_scale: ScoreScale = PROBABILITY
    takes_instruction: bool = False  # the server hands ``instruction`` to its score template (vLLM)
    instruction: str = ""  # sent as ``instruction`` when set

    def with_instruction(self, instruction: str) -> RerankDialect:
        return dataclasses.replace(self, instruction=instruction) if self.takes_instruction else self

    def build(self, batch: ScoreBatch, model: str) -> WireRequest:
        if len(batch.queries) != 1:
            raise ValueError(f"{self.name} scores one query per request, got {len(batch.queries)}")
        body: dict[str, Any] = {}
        if model:
            body["model"] = model
        body["query"] = batch.queries[0]
        body[self.documents_key] = batch.documents
        if self.instruction:
            body["instruction"] = self.instruction
        body.update(self.extra)
        return WireRequest("POST", self.path, body)

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]:
        data = read_success_json(answer)
        return scores_from_items(_result_items(data), len(batch), _SCORE_KEYS)


def _result_items(data: Any) -> Any:
    """Find the list of results: ``results`` (Cohere/Jina/...), ``data`` (Voyage/Mixedbread) or bare (TEI/SGLang)."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("results", "data"):
            if key in data:
                return data[key]
        raise MalformedAnswer("the answer has neither 'results' nor 'data'")
    raise MalformedAnswer(f"unexpected answer of type {type(data).__name__}")


@dataclass(frozen=True)
class TeiDialect:
    """Text-Embeddings-Inference: ``POST /rerank`` with ``texts``, answered by a bare list. TEI refuses
    more than ``max_client_batch_size`` texts (32 by default, read from ``GET /info``), has no ``model``
    or ``top_n`` field, and truncates over-long input itself when ``truncate`` is true."""

    name: str = "tei"
    path: str = "/rerank"
    max_pairs: int = TEI_DEFAULT_MAX_CLIENT_BATCH
    api: str = "rerank"
    mixes_queries: bool = False
    score_scale: ScoreScale = PROBABILITY  # we send raw_scores false: TEI applies the sigmoid
    instruction: str = ""

    def with_instruction(self, instruction: str) -> TeiDialect:
        return self  # TEI takes no instruction

    def build(self, batch: ScoreBatch, model: str) -> WireRequest:
        if len(batch.queries) != 1:
            raise ValueError(f"TEI scores one query per request, got {len(batch.queries)}")
        body = {"query": batch.queries[0], "texts": batch.documents, "truncate": True, "raw_scores": False,
                "return_text": False}
        return WireRequest("POST", self.path, body)

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]:
        return scores_from_items(read_success_json(answer), len(batch), ("score",))


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
