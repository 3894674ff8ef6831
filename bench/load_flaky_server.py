"""A flaky vLLM-style reranker on 127.0.0.1 for the load run: some answers are errors, some never come.

It speaks vLLM's ``GET /v1/models`` (so auto-detection knows it) and ``POST /rerank`` with word-overlap
scores, so a correct ranking can be checked. Each POST draws from a seeded RNG: with ``error_rate`` it
answers 503 in vLLM's error shape; with ``hang_rate`` it holds the request for ``hang_s`` (longer than
the client's timeout) and then answers; otherwise it answers at once. Every hold is bounded, so the
server always stops by itself.

It runs in a child process, so its event loop never competes with the client's for the GIL and the
client's resident memory is the client's alone.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from .child_server import ChildProcessServer
from .vllm_answers import models_handler, overlap_rerank_answer


@dataclass(frozen=True)
class Flakiness:
    error_rate: float = 0.10
    hang_rate: float = 0.05
    hang_s: float = 3.0
    seed: int = 7


def build_app(flakiness: Flakiness) -> web.Application:
    rng = random.Random(flakiness.seed)
    counts = {"received": 0, "answered": 0, "errors": 0, "hangs": 0}

    async def rerank(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        counts["received"] += 1
        draw = rng.random()
        if draw < flakiness.error_rate:
            counts["errors"] += 1
            error = {"message": "The server is overloaded", "type": "ServiceUnavailableError", "param": None,
                     "code": 503}
            return web.json_response({"error": error}, status=503)
        if draw < flakiness.error_rate + flakiness.hang_rate:
            counts["hangs"] += 1
            await asyncio.sleep(flakiness.hang_s)  # bounded; cancelled sooner when the client hangs up
        counts["answered"] += 1
        return web.json_response(overlap_rerank_answer(body, "load"))

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(counts)

    app = web.Application()
    app.router.add_post("/rerank", rerank)
    app.router.add_get("/v1/models", models_handler("load"))
    app.router.add_get("/stats", stats)
    return app


class FlakyServer(ChildProcessServer):
    """Context manager: the flaky server in a child process; ``url`` is its base URL."""

    def __init__(self, flakiness: Flakiness = Flakiness()) -> None:
        super().__init__(build_app, flakiness)

    async def requests_served(self) -> int:
        """Every scoring POST the server has received so far (answered, failed or held)."""
        async with aiohttp.ClientSession() as session, session.get(f"{self.url}/stats") as answer:
            counts = await answer.json()
        return int(counts["received"])
