"""The vLLM answer bodies the benchmark servers send, so auto-detection and parsing treat them as vLLM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def models_answer(model: str) -> dict[str, Any]:
    """``GET /v1/models``: ``owned_by: vllm`` is what detection reads."""
    return {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "vllm"}]}


def rerank_answer(scores: Sequence[float], model: str) -> dict[str, Any]:
    """``POST /rerank``: results sorted best first (equal scores keep input order), as vLLM sorts them."""
    results = sorted(({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                     key=lambda r: -r["relevance_score"])
    return {"id": f"score-{model}", "model": model, "results": results}
