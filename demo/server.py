"""A reference rerank server for the demo on 127.0.0.1, scored by ``word_overlap_score``: Infinity's routes, bodies,
status codes and error shapes (michaelfeil/infinity, ``infinity_server.py`` and ``fastapi_schemas/errors.py``),
so the plugin detects and talks to it exactly as to a real Infinity server."""

from __future__ import annotations

import contextlib
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Final

from aiohttp import web

from . import word_overlap_score

MODEL: Final = "demo-word-overlap"
LABEL: Final = "word overlap, a demo stand-in for a cross-encoder (not a neural model)"
_MAX_DOCUMENTS: Final = 2048


def _invalid(field: str, message: str, kind: str = "value_error") -> web.Response:
    """FastAPI's 422 validation shape, as Infinity answers it."""
    return web.json_response({"detail": [{"type": kind, "loc": ["body", field], "msg": message}]}, status=422)


def _problem(body: Any) -> web.Response | None:
    if not isinstance(body, dict):
        return _invalid("body", "Input should be a valid dictionary", "model_attributes_type")
    if not isinstance(body.get("query"), str):
        return _invalid("query", "Field required" if "query" not in body else "Input should be a valid string")
    documents = body.get("documents")
    if not isinstance(documents, list) or not all(isinstance(d, str) for d in documents):
        return _invalid("documents", "Input should be a valid list of strings")
    if not 1 <= len(documents) <= _MAX_DOCUMENTS:
        return _invalid("documents", f"List should have between 1 and {_MAX_DOCUMENTS} items", "too_short")
    top_n = body.get("top_n")
    if top_n is not None and (not isinstance(top_n, int) or isinstance(top_n, bool) or top_n <= 0):
        return _invalid("top_n", "Input should be greater than 0", "greater_than")
    return None


async def rerank(request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except ValueError:
        return _invalid("body", "JSON decode error", "json_invalid")
    if (problem := _problem(body)) is not None:
        return problem
    query, documents = body["query"].strip(), [d.strip() for d in body["documents"]]
    scores = sorted(((word_overlap_score(query, d), i) for i, d in enumerate(documents)), key=lambda s: (-s[0], s[1]))
    echo = bool(body.get("return_documents"))
    results = [{"relevance_score": score, "index": i, "document": documents[i] if echo else None}
               for score, i in scores]
    tokens = sum(len(query.split()) + len(d.split()) for d in documents)
    return web.json_response({
        "object": "rerank", "results": results[: body.get("top_n") or len(results)], "model": MODEL,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}, "id": f"infinity-{uuid.uuid4()}",
        "created": int(time.time()),
    })


async def models(_: web.Request) -> web.Response:
    model = {"id": MODEL, "object": "model", "owned_by": "infinity", "created": int(time.time()),
             "backend": "demo", "capabilities": ["rerank"]}
    return web.json_response({"object": "list", "data": [model]})


async def health(_: web.Request) -> web.Response:
    return web.json_response({"unix": time.time()})


@web.middleware
async def fastapi_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Unknown routes and methods answer as FastAPI does: ``{"detail": "Not Found"}`` (404) or 405."""
    try:
        response: web.StreamResponse = await handler(request)
    except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
        return web.json_response({"detail": exc.reason}, status=exc.status)
    return response


@contextlib.asynccontextmanager
async def demo_server(port: int = 0) -> AsyncIterator[str]:
    """Serve on 127.0.0.1 (a free port by default) on the running loop; yields the server's URL."""
    app = web.Application(middlewares=[fastapi_errors])
    app.add_routes([web.post("/rerank", rerank), web.get("/models", models), web.get("/health", health)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        host, bound = runner.addresses[0][:2]
        yield f"http://{host}:{bound}"
    finally:
        await runner.cleanup()


if __name__ == "__main__":  # not how to run it: say what is
    print("This module is the demo's reranker server; keep one running with: a0-reranker demo --serve", file=sys.stderr)
    sys.exit(2)
