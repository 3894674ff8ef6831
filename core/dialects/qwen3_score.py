"""vLLM ``/score`` carrying the Qwen3-Reranker judge template rendered on our side.

vLLM serves Qwen3-Reranker without applying its prompt unless it is started with a score template
(``--chat-template``, vLLM's ``examples/pooling/score/template/qwen3_reranker.jinja``): "without
template, the results are almost as random" (vllm-project/vllm PR #19260). So the raw texts score near
randomly; sent as ``text_1``/``text_2`` halves of the official prompt they score as the model was
trained. ``/score`` accepts 1:N and N:N lists, so pairs of *different* queries share one request:
this is what lets the batcher coalesce the recalls of many agents into one call.

The prompt is split as QwenLM's and vLLM's examples do. vLLM joins the two texts of a pair with no
separator for this model, so ``query_text + document_text`` is byte-for-byte the official Transformers
prompt (QwenLM/Qwen3-Embedding README, "Transformers Usage"; the model card carries the same code).
User text is inserted by plain concatenation, never through ``str.format``, so braces, ``%s`` and
newlines in it stay as they are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from ..errors import MalformedAnswer
from ..scores import PROBABILITY, ScoreScale
from .wire import ScoreBatch, WireAnswer, WireRequest, read_success_json, scores_from_items

PREFIX: Final = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
SUFFIX: Final = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def query_text(query: str, instruction: str) -> str:
    """First half of the prompt (vLLM ``text_1``): system turn, instruction and query."""
    return PREFIX + "<Instruct>: " + instruction + "\n<Query>: " + query + "\n"


def document_text(document: str) -> str:
    """Second half of the prompt (vLLM ``text_2``): the document and the assistant turn to judge."""
    return "<Document>: " + document + SUFFIX


def full_prompt(query: str, document: str, instruction: str) -> str:
    """The official single-string prompt; equal to ``query_text(...) + document_text(...)``."""
    return query_text(query, instruction) + document_text(document)


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
        # 1:N, the smallest body, or N:N
        text_1: str | list[str] = templated[0] if len(templated) == 1 else [templated[qi] for qi, _ in batch.pairs]
        body: dict[str, Any] = {"model": model} if model else {}
        body["text_1"] = text_1
        body["text_2"] = [document_text(doc) for _, doc in batch.pairs]
        return WireRequest("POST", self.path, body)

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]:
        data = read_success_json(answer)
        if not isinstance(data, dict) or "data" not in data:
            raise MalformedAnswer("a /score answer must be an object with 'data'")
        return scores_from_items(data["data"], len(batch), ("score",))
