"""llama.cpp's ``llama-server`` (ggml-org/llama.cpp ``tools/server/server.cpp`` and
``server-common.cpp``; answers captured on loopback)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .protocol_app import ProtocolApp
from .ranking import best_first, cut
from .scoring import Scorer, lexical_scorer, pair_tokens, to_logit
from .wire import body_text, is_int, is_str_list, json_response, key_accepted, parse_json, unix_now

_RERANK_PATHS = ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking")
_PUBLIC = frozenset({"/health", "/v1/health", "/models", "/v1/models", "/api/tags", "/"})
_LISTED_WHILE_LOADING = frozenset({"/models", "/v1/models", "/api/tags"})
_NOT_SUPPORTED = "This server does not support reranking. Start it with `--reranking`"


class LlamaRejected(ValueError):
    """An error llama.cpp answers as ``{"error": {"code", "message", "type"}}``."""

    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


class LlamaCppApp(ProtocolApp):
    """``llama-server`` with one model.

    Options: ``reranking`` (True; False -> 501 not_supported_error on every rerank route);
    ``api_key`` (401 "Invalid API Key" on every path but the public ones, checked before routing,
    so unknown paths too); ``batch_size`` (512 tokens: a longer query+document is a 500);
    ``model`` (the alias); ``probabilities`` (False: raw logits as a BERT-style GGUF gives; True:
    P(yes) in [0,1] as a Qwen3-Reranker GGUF gives); ``loading`` (False; True while the model loads, a
    test may set it False: ``middleware_server_state`` answers every path but ``/models``, ``/v1/models`` and
    ``/api/tags`` with 503 "Loading model", ``unavailable_error``, after the key check; the listing's ``meta``
    is null until the model is loaded).
    """

    kind = "llamacpp"

    def __init__(self, *, scorer: Scorer = lexical_scorer, reranking: bool = True,
                 api_key: str | None = None, batch_size: int = 512, model: str = "minilm-l6-ce",
                 probabilities: bool = False, loading: bool = False) -> None:
        super().__init__(scorer=scorer)
        self.reranking = reranking
        self.api_key = api_key
        self.batch_size = batch_size
        self.model = model
        self.probabilities = probabilities
        self.loading = loading

    def routes(self) -> list[web.RouteDef]:
        rerank = [web.post(path, self.rerank) for path in _RERANK_PATHS]
        models = [web.get(path, self.models) for path in ("/models", "/v1/models")]
        health = [web.get(path, self.health) for path in ("/health", "/v1/health")]
        misc = [web.get("/api/tags", self.tags), web.get("/props", self.props), web.get("/", self.index)]
        return [*rerank, *models, *health, *misc]

    def guard(self, request: web.Request, matched: bool) -> web.StreamResponse | None:
        if request.path not in _PUBLIC and not key_accepted(request, self.api_key):
            body = {"error": {"message": "Invalid API Key", "type": "authentication_error", "code": 401}}
            return json_response(body, 401)
        if not self.loading or request.path in _LISTED_WHILE_LOADING:
            return None
        if request.path == "/":
            return web.Response(status=503, text="<html><title>Loading model</title></html>", content_type="text/html")
        return _error(LlamaRejected(503, "Loading model", "unavailable_error"))

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        """cpp-httplib routes by method and path, so a wrong method is also "File Not Found"."""
        return _error(LlamaRejected(404, "File Not Found", "not_found_error"))

    async def rerank(self, request: web.Request) -> web.Response:
        try:
            if not self.reranking:
                raise LlamaRejected(501, _NOT_SUPPORTED, "not_supported_error")
            body = _read_body(await body_text(request))
            query, documents, tei_format = _read_request(body)
            scores = self._scores(query, documents)
        except LlamaRejected as rejected:
            return _error(rejected)
        order = cut(best_first(scores), _top_n(body, len(documents)))
        if tei_format:
            return json_response(_tei_items(order, scores, documents, body.get("return_text") is True))
        tokens = sum(pair_tokens(query, doc) for doc in documents)
        results = [{"index": i, "relevance_score": scores[i]} for i in order]
        return json_response({"model": body.get("model") or self.model, "object": "list",
                              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}, "results": results})

    def _scores(self, query: str, documents: list[str]) -> list[float]:
        """Each query+document must fit in one ubatch; there is no truncation."""
        for doc in documents:
            tokens = pair_tokens(query, doc)
            if tokens > self.batch_size:
                message = (f"input ({tokens} tokens) is too large to process. increase the physical "
                           f"batch size (current batch size: {self.batch_size})")
                raise LlamaRejected(500, message, "server_error")
        scores = [self.scorer(query, doc) for doc in documents]
        return scores if self.probabilities else [to_logit(s) for s in scores]

    async def models(self, request: web.Request) -> web.Response:
        meta = {"vocab_type": 3, "n_vocab": 30522, "n_ctx_train": 512, "n_embd": 384,
                "n_params": 22713601, "size": 45941248}
        entry = {"id": self.model, "object": "model", "created": unix_now(), "owned_by": "llamacpp",
                 "meta": None if self.loading else meta}
        ollama = {"name": self.model, "model": self.model, "type": "model", "capabilities": ["completion"]}
        return json_response({"models": [ollama], "object": "list", "data": [entry]})

    async def health(self, request: web.Request) -> web.Response:
        return json_response({"status": "ok"})

    async def tags(self, request: web.Request) -> web.Response:
        return json_response({"models": [{"name": self.model, "model": self.model}]})

    async def props(self, request: web.Request) -> web.Response:
        return json_response({"model_alias": self.model, "model_path": f"/models/{self.model}.gguf",
                              "modalities": {"vision": False, "audio": False}, "chat_template": ""})

    async def index(self, request: web.Request) -> web.Response:
        return web.Response(text="<html><title>llama.cpp</title></html>", content_type="text/html")


def _read_body(text: str) -> dict[str, Any]:
    parsed = parse_json(text)
    if not parsed.ok:
        assert parsed.error is not None
        at = f"line {parsed.error.lineno}, column {parsed.error.colno}"
        message = f"[json.exception.parse_error.101] parse error at {at}: syntax error while parsing value"
        raise LlamaRejected(400, message, "invalid_request_error")
    if not isinstance(parsed.value, dict):
        raise LlamaRejected(400, '"query" must be provided', "invalid_request_error")
    body: dict[str, Any] = parsed.value
    return body


def _read_request(body: dict[str, Any]) -> tuple[str, list[str], bool]:
    """(query, documents, TEI format?): ``texts`` switches to TEI format; non-string lists count
    as empty, as llama.cpp reads them."""
    if not isinstance(body.get("query"), str):
        raise LlamaRejected(400, '"query" must be provided', "invalid_request_error")
    tei_format = "texts" in body
    documents = body.get("texts" if tei_format else "documents")
    if not is_str_list(documents) or not documents:
        raise LlamaRejected(400, '"documents" must be a non-empty string array', "invalid_request_error")
    return body["query"], documents, tei_format


def _top_n(body: dict[str, Any], count: int) -> int:
    """Default all; 0 gives no results (observed); negative is taken as 0 (plain choice)."""
    top_n = body.get("top_n", count)
    return max(top_n, 0) if is_int(top_n) else count


def _tei_items(order: list[int], scores: list[float], documents: list[str], with_text: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in order:
        item: dict[str, Any] = {"index": i, "score": scores[i]}
        if with_text:
            item["text"] = documents[i]
        items.append(item)
    return items


def _error(rejected: LlamaRejected) -> web.Response:
    body = {"error": {"code": rejected.status, "message": str(rejected), "type": rejected.kind}}
    return json_response(body, rejected.status)
