"""Hugging Face Text-Embeddings-Inference: ``POST /rerank`` with ``texts``, answered by a bare list.

TEI refuses more than ``max_client_batch_size`` texts (32 by default, read from ``GET /info``), has no
``model`` or ``top_n`` field, and truncates over-long input itself when ``truncate`` is true.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..scores import PROBABILITY, ScoreScale
from .wire import ScoreBatch, WireAnswer, WireRequest, read_success_json, scores_from_items

TEI_DEFAULT_MAX_CLIENT_BATCH = 32


@dataclass(frozen=True)
class TeiDialect:
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
        body = {
            "query": batch.queries[0],
            "texts": batch.documents,
            "truncate": True,
            "raw_scores": False,
            "return_text": False,
        }
        return WireRequest("POST", self.path, body)

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]:
        return scores_from_items(read_success_json(answer), len(batch), ("score",))
