"""The vLLM answer bodies the benchmark servers send, so auto-detection and parsing treat them as vLLM."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from ..demo import word_overlap_score


def models_answer(model: str) -> dict[str, Any]:
    """``GET /v1/models``: ``owned_by: vllm`` is what detection reads."""
    return {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "vllm"}]}


def rerank_answer(scores: Sequence[float], model: str) -> dict[str, Any]:
    """``POST /rerank``: results sorted best first (equal scores keep input order), as vLLM sorts them."""
    results = sorted(({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                     key=lambda r: -r["relevance_score"])
    return {"id": f"score-{model}", "model": model, "results": results}


def overlap_rerank_answer(body: Mapping[str, Any], model: str) -> dict[str, Any]:
    """``POST /rerank`` scored by word overlap: the benchmark servers' ranking, meaningful and cheap."""
    return rerank_answer([word_overlap_score(body["query"], d) for d in body["documents"]], model)


def models_handler(model: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The ``GET /v1/models`` route of a benchmark server serving ``model``."""

    async def models(_: web.Request) -> web.Response:
        return web.json_response(models_answer(model))

    return models
