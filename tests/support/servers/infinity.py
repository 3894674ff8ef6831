"""Infinity (michaelfeil/infinity: ``infinity_server.py``, ``fastapi_schemas/``; answers of
infinity-emb 0.0.78 captured on loopback)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from .protocol_app import ProtocolApp
from .pydantic_errors import BodyCheck, ErrorDict, body_errors
from .ranking import best_first, cut
from .scoring import Scorer, lexical_scorer, pair_tokens, to_logit
from .wire import body_text, json_response, key_accepted, parse_json, unix_now, uuid_id

_MAX_QUERY_CHARS = 8192 * 15
_ANY_MODEL = "default/not-specified"


class InfinityApp(ProtocolApp):
    """Infinity's FastAPI server.

    Options: ``url_prefix`` "" (default) or "/v1" (``/health`` and ``/metrics`` stay unprefixed);
    ``models``: served rerank model names; ``embedding_models``: served names without rerank
    (a rerank on them is 400 ModelNotDeployedError); ``api_key``; ``max_client_batch_size`` (2048).
    Query and documents are whitespace-stripped before scoring and when echoed back.
    """

    kind = "infinity"

    def __init__(self, *, scorer: Scorer = lexical_scorer, url_prefix: str = "",
                 models: Sequence[str] = ("minilm-l6-ce",), embedding_models: Sequence[str] = (),
                 api_key: str | None = None, max_client_batch_size: int = 2048) -> None:
        super().__init__(scorer=scorer)
        if url_prefix not in ("", "/v1"):
            raise ValueError("url_prefix must be '' or '/v1'")
        self.prefix = url_prefix
        self.models = list(models)
        self.embedding_models = list(embedding_models)
        self.api_key = api_key
        self.max_client_batch_size = max_client_batch_size

    def routes(self) -> list[web.RouteDef]:
        p = self.prefix
        return [
            web.post(f"{p}/rerank", self.rerank),
            web.get(f"{p}/models", self.list_models),
            web.post(f"{p}/embeddings", self.embeddings),
            web.get("/health", self.health),
            web.get("/metrics", self.metrics),
            web.get("/", self.root),
            web.get("/docs", self.docs),
        ]

    def guard(self, request: web.Request, matched: bool) -> web.StreamResponse | None:
        """Every API route needs the key (FastAPI dependency: only matched routes)."""
        api_routes = (f"{self.prefix}/rerank", f"{self.prefix}/models", f"{self.prefix}/embeddings")
        if matched and request.path in api_routes and not key_accepted(request, self.api_key):
            return json_response({"detail": "Unauthorized"}, 401, {"WWW-Authenticate": "Bearer"})
        return None

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        return json_response({"detail": "Not Found" if status == 404 else "Method Not Allowed"}, status)

    async def rerank(self, request: web.Request) -> web.Response:
        text = await body_text(request)
        parsed = parse_json(text)
        errors = body_errors(text, parsed.value, parsed.error)
        if errors:
            return _unprocessable(errors)
        check = BodyCheck(parsed.value)
        fields = self._validate(check)
        if check.errors:
            return _unprocessable(check.errors)
        model, problem = self._resolve(fields["model"], "rerank")
        if problem is not None:
            return problem
        return json_response(self._ranked(fields, model))

    def _validate(self, check: BodyCheck) -> dict[str, Any]:
        return {
            "query": check.string("query", strip=True, max_length=_MAX_QUERY_CHARS),
            "documents": check.string_list("documents", strip=True, min_items=1,
                                           max_items=self.max_client_batch_size),
            "return_documents": check.boolean("return_documents"),
            "raw_scores": check.boolean("raw_scores"),
            "model": check.string("model", required=False, default=_ANY_MODEL),
            "top_n": check.integer("top_n", gt=0),
        }

    def _ranked(self, fields: dict[str, Any], model: str) -> dict[str, Any]:
        query, documents = fields["query"], fields["documents"]
        scores = [self.scorer(query, doc) for doc in documents]
        if fields["raw_scores"]:
            scores = [to_logit(s) for s in scores]
        results = [
            {"relevance_score": scores[i], "index": i,
             "document": documents[i] if fields["return_documents"] else None}
            for i in cut(best_first(scores), fields["top_n"])
        ]
        tokens = sum(pair_tokens(query, doc) for doc in documents)
        return {"object": "rerank", "results": results, "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                "id": uuid_id("infinity-"), "created": unix_now()}

    def _resolve(self, requested: str, capability: str) -> tuple[str, web.Response | None]:
        """The served model a request goes to, or Infinity's 400 for it."""
        served = self.models + self.embedding_models
        if len(served) == 1:
            name = served[0]
        elif requested in served:
            name = requested
        else:
            message = (f"Invalid model: Engine for model name `{requested}` not found. "
                       f"Available model names are {served}")
            return requested, _openai_error(400, message)
        has = "rerank" if name in self.models else "embed"
        if has != capability:
            message = (f"ModelNotDeployedError: model=`{name}` does not support `{capability}`. "
                       f"Options are {{'{has}'}}.")
            return name, _openai_error(400, message)
        return name, None

    async def list_models(self, request: web.Request) -> web.Response:
        entries = [self._model_entry(name, "rerank") for name in self.models]
        entries += [self._model_entry(name, "embed") for name in self.embedding_models]
        return json_response({"data": entries, "object": "list"})

    @staticmethod
    def _model_entry(name: str, capability: str) -> dict[str, Any]:
        stats = {"queue_fraction": 0.0, "queue_absolute": 0, "results_pending": 0, "batch_size": 32}
        return {"id": name, "stats": stats, "object": "model", "owned_by": "infinity",
                "created": unix_now(), "backend": "torch", "capabilities": [capability]}

    async def embeddings(self, request: web.Request) -> web.Response:
        """Only the model check matters to a rerank client; embedding models get a tiny vector."""
        parsed = parse_json(await body_text(request))
        requested = parsed.value.get("model", _ANY_MODEL) if isinstance(parsed.value, dict) else _ANY_MODEL
        model, problem = self._resolve(str(requested), "embed")
        if problem is not None:
            return problem
        data = [{"object": "embedding", "embedding": [0.0, 1.0], "index": 0}]
        return json_response({"object": "list", "data": data, "model": model,
                              "usage": {"prompt_tokens": 1, "total_tokens": 1},
                              "id": uuid_id("infinity-"), "created": unix_now()})

    async def health(self, request: web.Request) -> web.Response:
        return json_response({"unix": time.time()})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text="# infinity test server\n", content_type="text/plain")

    async def root(self, request: web.Request) -> web.Response:
        """``GET /`` redirects to ``/docs`` (FastAPI's RedirectResponse, 307)."""
        return web.Response(status=307, headers={"Location": "/docs"})

    async def docs(self, request: web.Request) -> web.Response:
        return web.Response(text="<html><title>Infinity</title></html>", content_type="text/html")


def _unprocessable(errors: list[ErrorDict]) -> web.Response:
    return json_response({"detail": errors}, 422)


def _openai_error(status: int, message: str) -> web.Response:
    return json_response({"error": {"message": message, "type": None, "param": None, "code": status}}, status)
