"""SGLang's rerank endpoint (sgl-project/sglang, ``/v1/rerank``): a bare list with ``meta_info``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .hosted_input import Fields, InputError, read_input
from .protocol_app import ProtocolApp
from .ranking import best_first, cut
from .scoring import Scorer, lexical_scorer, pair_tokens
from .wire import body_text, empty_response, hex_id, json_response, key_accepted, parse_json, unix_now


class SglangApp(ProtocolApp):
    """``POST /v1/rerank`` (``query``, ``documents``, ``instruct``, ``top_n``, ``return_documents``),
    ``GET /v1/models`` (``owned_by: "sglang"``), ``GET /health``.

    Results are sorted best first and cut to ``top_n``; ``document`` is the text unless ``return_documents``
    (default true) is false, and then absent (``RerankResponse``'s serializer drops a None document:
    sgl-project/sglang ``entrypoints/openai/protocol.py``). Not documented, so plain: ``meta_info`` holds an
    id and the prompt tokens; errors use the flat OpenAI-style body SGLang's OpenAI layer sends
    (``{"object": "error", "message", "type", "param", "code"}``); unknown routes are FastAPI's 404.
    A query+document of ``context_length`` tokens or more is refused with a 400, worded as SGLang's
    ``TokenizerManager._validate_one_request`` words it (no truncation unless ``--allow-auto-truncate``;
    ``serving_rerank`` turns the ValueError into that error body). A blank (empty or whitespace-only) query or
    document is refused with a 400 first, in SGLang's words (``_validate_request`` in sgl-project/sglang
    ``python/sglang/srt/entrypoints/openai/serving_rerank.py``). Options: ``api_key``, ``model``,
    ``context_length`` (8192).
    """

    kind = "sglang"

    def __init__(self, *, scorer: Scorer = lexical_scorer, api_key: str | None = None,
                 model: str = "BAAI/bge-reranker-v2-m3", context_length: int = 8192) -> None:
        super().__init__(scorer=scorer)
        self.api_key = api_key
        self.model = model
        self.context_length = context_length

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/rerank", self.rerank), web.get("/v1/models", self.models),
                web.get("/health", self.health)]

    def guard(self, request: web.Request, matched: bool) -> web.StreamResponse | None:
        if matched and request.path != "/health" and not key_accepted(request, self.api_key):
            return _error(401, "Unauthorized", "AuthenticationError")
        return None

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        return json_response({"detail": "Not Found" if status == 404 else "Method Not Allowed"}, status)

    async def rerank(self, request: web.Request) -> web.Response:
        try:
            data = read_input(parse_json(await body_text(request)), Fields())
            with_docs = data.flag("return_documents", True)
            _check_not_blank(data.query, data.texts)
            self._check_lengths(data.query, data.texts)
        except InputError as problem:
            return _error(400, str(problem), "BadRequestError")
        scores = [self.scorer(data.query, text) for text in data.texts]
        items: list[dict[str, Any]] = [
            {"score": scores[i], "document": data.texts[i], "index": i,
             "meta_info": {"id": hex_id(""), "prompt_tokens": pair_tokens(data.query, data.texts[i])}}
            for i in cut(best_first(scores), data.top)
        ]
        return json_response(items if with_docs else [{k: v for k, v in item.items() if k != "document"}
                                                      for item in items])

    def _check_lengths(self, query: str, texts: list[str]) -> None:
        for text in texts:
            tokens = pair_tokens(query, text)
            if tokens >= self.context_length:
                raise InputError(f"The input ({tokens} tokens) is longer than the model's context length "
                                 f"({self.context_length} tokens).")

    async def models(self, request: web.Request) -> web.Response:
        entry = {"id": self.model, "object": "model", "created": unix_now(), "owned_by": "sglang",
                 "root": self.model}
        return json_response({"object": "list", "data": [entry]})

    async def health(self, request: web.Request) -> web.Response:
        return empty_response(200)


def _check_not_blank(query: str, texts: list[str]) -> None:
    """SGLang's ``OpenAIServingRerank._validate_request``, in its order and words."""
    if not query:
        raise InputError("Query cannot be empty")
    if not query.strip():
        raise InputError("Query cannot be empty or whitespace only")
    for text in texts:
        if not text:
            raise InputError("Each document must be a non-empty string")
        if not text.strip():
            raise InputError("Each document cannot be empty or whitespace only")


def _error(status: int, message: str, kind: str) -> web.Response:
    return json_response({"object": "error", "message": message, "type": kind, "param": None,
                          "code": status}, status)
