"""vLLM ``/score`` carrying the Qwen3-Reranker judge template rendered on our side.

vLLM serves Qwen3-Reranker without applying its prompt unless it is started with a score template
(``--chat-template``, vLLM's ``examples/pooling/score/template/qwen3_reranker.jinja``): "without
template, the results are almost as random" (vllm-project/vllm PR #19260). So the raw texts score near
randomly; sent as ``text_1``/``text_2`` halves of the official prompt they score as the model was
trained. ``/score`` accepts 1:N and N:N lists, so pairs of *different* queries share one request:
this is what lets the batcher coalesce the recalls of many agents into one call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import MalformedAnswer
from ..qwen3_template import document_text, query_text
from ..scores import PROBABILITY, ScoreScale
from .wire import ScoreBatch, WireAnswer, WireRequest, read_success_json, scores_from_items


@dataclass(frozen=True)
class Qwen3ScoreDialect:
    instruction: str
    name: str = "qwen3_score"
    path: str = "/score"
    max_pairs: int = 100_000
    api: str = "qwen3_score"
    mixes_queries: bool = True
    score_scale: ScoreScale = PROBABILITY  # P(yes): vLLM's sigmoid of the (yes - no) logit

    def with_instruction(self, instruction: str) -> Qwen3ScoreDialect:
        return dataclasses.replace(self, instruction=instruction)

    def build(self, batch: ScoreBatch, model: str) -> WireRequest:
        templated = [query_text(query, self.instruction) for query in batch.queries]
        text_1: str | list[str]
        if len(templated) == 1:
            text_1 = templated[0]  # 1:N, the smallest body
        else:
            text_1 = [templated[qi] for qi, _ in batch.pairs]  # N:N
        body: dict[str, Any] = {}
        if model:
            body["model"] = model
        body["text_1"] = text_1
        body["text_2"] = [document_text(doc) for _, doc in batch.pairs]
        return WireRequest("POST", self.path, body)

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]:
        data = read_success_json(answer)
        if not isinstance(data, dict) or "data" not in data:
            raise MalformedAnswer("a /score answer must be an object with 'data'")
        return scores_from_items(data["data"], len(batch), ("score",))
