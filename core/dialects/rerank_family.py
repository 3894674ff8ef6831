"""The ``/rerank`` family that takes ``query`` + a list of documents and answers with scored indices.

Cohere (v1, v2), Jina, Infinity, vLLM, llama.cpp, SGLang and the Cohere-compatible services share
this shape; they differ in the route, the name of the documents field, a few optional fields, the
container of the results (``results``, ``data`` or a bare list) and the name of the score. Requests
carry one query each (the servers score one query against many documents).

vLLM's ``/rerank`` takes an ``instruction`` that its score template receives (vLLM's ``RerankRequest``):
a vLLM started with the Qwen3-Reranker template renders the judge prompt itself, with that line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import MalformedAnswer
from ..scores import PROBABILITY, ScoreScale
from .wire import ScoreBatch, WireAnswer, WireRequest, read_success_json, scores_from_items

_SCORE_KEYS = ("relevance_score", "score")


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
