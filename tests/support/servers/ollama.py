"""Ollama (ollama/ollama#3368, open): no rerank API at all; a client must recognise and reject it."""

from __future__ import annotations

from aiohttp import web

from .protocol_app import ProtocolApp
from .scoring import Scorer, lexical_scorer
from .wire import json_response, unix_now


class OllamaApp(ProtocolApp):
    """``GET /api/version``, ``/api/tags``, ``/v1/models`` and ``/``; every rerank path is a 404.

    Not documented for this case, so plain choices: the 404 is Gin's default text/plain "404 page not
    found"; ``/`` says "Ollama is running"; ``owned_by`` is "library". Options: ``version``, ``model``.
    """

    kind = "ollama"

    def __init__(self, *, scorer: Scorer = lexical_scorer, version: str = "0.12.6",
                 model: str = "qwen3:0.6b") -> None:
        super().__init__(scorer=scorer)
        self.version = version
        self.model = model

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/api/version", self.version_info), web.get("/api/tags", self.tags),
                web.get("/v1/models", self.models), web.get("/", self.index)]

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        return web.Response(status=404, text="404 page not found", content_type="text/plain")

    async def version_info(self, request: web.Request) -> web.Response:
        return json_response({"version": self.version})

    async def tags(self, request: web.Request) -> web.Response:
        return json_response({"models": [{"name": self.model, "model": self.model}]})

    async def models(self, request: web.Request) -> web.Response:
        entry = {"id": self.model, "object": "model", "created": unix_now(), "owned_by": "library"}
        return json_response({"object": "list", "data": [entry]})

    async def index(self, request: web.Request) -> web.Response:
        return web.Response(text="Ollama is running", content_type="text/plain")
