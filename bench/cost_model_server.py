"""A loopback reranker that costs time the way one GPU does, for the batching benchmark.

Each request pays ``request_ms`` of overhead (parsing, tokenising, scheduling) that overlaps with
other requests, then waits for the one "GPU": a forward pass costs ``forward_ms`` plus ``pair_ms``
per pair, one pass at a time. The GPU never waits for the server's own CPU: scores are computed
before a request's pass and its answer is built once the next pass has started. (Computing them after
the pass, on the one event loop, had put 3-6 ms between passes, a cost per pass the model does not
state, which weighed on every configuration that makes smaller requests.)

It speaks vLLM's ``/score`` (1:N and N:N) and ``/rerank``, and ``GET /v1/models`` so auto-detection
finds it. Scores are word overlap, so rankings are meaningful.

It runs in a child process so that its event loop never competes with the client's for the GIL.
"""

from __future__ import annotations

import asyncio
import functools
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .child_server import ChildProcessServer
from .vllm_answers import models_answer, rerank_answer


@dataclass(frozen=True)
class CostModel:
    request_ms: float = 1.0
    forward_ms: float = 10.0
    pair_ms: float = 0.1


_WORD = re.compile(r"[a-z0-9]+")


def cheap_score(query: str, document: str) -> float:
    """Share of the query's words found in the document: meaningful enough to rank, and a few
    microseconds a pair, so the server's own CPU adds next to nothing to the stated costs (the demo's
    stemming scorer costs several times more, which at hundreds of pairs per request would). A query's
    words are found once, not once a pair: a Qwen3 judge prompt wraps each query in some 400
    characters, and reading them for each of 220 pairs had cost 8 ms before every such pass."""
    words = _query_words(query)
    return len(words & set(_WORD.findall(document.lower()))) / len(words) if words else 0.0


@functools.lru_cache(maxsize=1024)
def _query_words(query: str) -> frozenset[str]:
    return frozenset(_WORD.findall(query.lower()))


class _Gpu:
    def __init__(self, cost: CostModel) -> None:
        self.cost = cost
        self.lock = asyncio.Lock()
        self.requests = 0
        self.pairs = 0

    async def run(self, pairs: list[tuple[str, str]]) -> list[float]:
        scores = [cheap_score(q, d) for q, d in pairs]  # before the pass, while another may run
        await asyncio.sleep(self.cost.request_ms / 1000)
        async with self.lock:
            await asyncio.sleep((self.cost.forward_ms + self.cost.pair_ms * len(pairs)) / 1000)
            self.requests += 1  # counted once its pass is done: a request still waiting is no GPU time yet
            self.pairs += len(pairs)
        await asyncio.sleep(0)  # the next request's pass starts before this answer is built
        return scores


def build_app(cost: CostModel) -> web.Application:
    gpu = _Gpu(cost)

    async def score(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        text_1, text_2 = body["text_1"], body["text_2"]
        queries = [text_1] * len(text_2) if isinstance(text_1, str) else text_1
        scores = await gpu.run(list(zip(queries, text_2, strict=True)))
        data = [{"index": i, "object": "score", "score": s} for i, s in enumerate(scores)]
        return web.json_response({"id": "score-bench", "object": "list", "model": "bench", "data": data})

    async def rerank(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        documents = body["documents"]
        scores = await gpu.run([(body["query"], d) for d in documents])
        return web.json_response(rerank_answer(scores, "bench"))

    async def models(_: web.Request) -> web.Response:
        return web.json_response(models_answer("bench"))

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({"requests": gpu.requests, "pairs": gpu.pairs})

    app = web.Application()
    app.router.add_post("/score", score)
    app.router.add_post("/rerank", rerank)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", stats)
    return app


class CostModelServer(ChildProcessServer):
    """Context manager: start the server in a child process; ``url`` is its base URL."""

    def __init__(self, cost: CostModel = CostModel()) -> None:
        super().__init__(build_app, cost)
