"""Hugging Face Text-Embeddings-Inference (huggingface/text-embeddings-inference: ``router/src/http/server.rs``,
``docs/openapi.json``)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .protocol_app import ProtocolApp
from .ranking import best_first
from .recording import RECORDED
from .scoring import Scorer, lexical_scorer, pair_tokens, to_logit
from .tei_body import BodyRejected, read_rerank_body
from .tei_permits import OVERLOADED_MESSAGE, Permits
from .wire import body_text, empty_response, json_response, key_accepted

_PUBLIC = frozenset({"/health", "/", "/ping", "/metrics"})


class TeiApp(ProtocolApp):
    """TEI's axum router: ``GET /info``, ``POST /rerank`` (and ``POST /``, ``/invocations``).

    Options: ``api_key`` (401 with an empty body on non-public routes; ``/info`` is not public);
    ``max_client_batch_size`` (32); ``reranker`` (True; False serves an embedding model, so a rerank
    is 424 Backend); ``model``; ``version`` ("1.9.3"); ``max_input_length`` (512, reported only:
    ``--auto-truncate`` is on by default in 1.9, so long inputs are truncated, never refused);
    ``max_concurrent_requests`` (512: ``--max-concurrent-requests``): each text of a rerank holds one of these
    permits through its inference, and a rerank a text of which finds none free is 429 Overloaded
    (``tei_permits``; ``app.permits.inference`` holds texts in inference, so their permits stay taken).
    """

    kind = "tei"

    def __init__(self, *, scorer: Scorer = lexical_scorer, api_key: str | None = None,
                 max_client_batch_size: int = 32, reranker: bool = True,
                 model: str = "BAAI/bge-reranker-base", version: str = "1.9.3",
                 max_input_length: int = 512, max_concurrent_requests: int = 512) -> None:
        super().__init__(scorer=scorer)
        self.api_key = api_key
        self.max_client_batch_size = max_client_batch_size
        self.reranker = reranker
        self.model = model
        self.version = version
        self.max_input_length = max_input_length
        self.permits = Permits(max_concurrent_requests)

    def routes(self) -> list[web.RouteDef]:
        """``POST /`` and ``/invocations`` go to rerank only when the model is a reranker."""
        routes = [web.get("/info", self.info), web.post("/rerank", self.rerank)]
        if self.reranker:
            routes += [web.post("/", self.rerank), web.post("/invocations", self.rerank)]
        bare = [web.get(path, self.ok) for path in ("/health", "/ping", "/")]
        return [*routes, *bare, web.get("/metrics", self.metrics)]

    def guard(self, request: web.Request, matched: bool) -> web.StreamResponse | None:
        """axum route_layer: only matched, non-public routes check the key."""
        public = request.method in ("GET", "HEAD") and request.path in _PUBLIC
        if matched and not public and not key_accepted(request, self.api_key):
            return empty_response(401)
        return None

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        return empty_response(status)

    async def info(self, request: web.Request) -> web.Response:
        return json_response(self._info())

    def _info(self) -> dict[str, Any]:
        model_type: dict[str, Any] = (
            {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}
            if self.reranker else {"embedding": {"pooling": "cls"}}
        )
        return {"model_id": self.model, "model_sha": None, "model_dtype": "float32",
                "served_model_name": self.model, "model_type": model_type,
                "max_concurrent_requests": self.permits.total, "max_input_length": self.max_input_length,
                "max_batch_tokens": 16384, "max_batch_requests": None,
                "max_client_batch_size": self.max_client_batch_size, "auto_truncate": True,
                "tokenization_workers": 4, "version": self.version, "sha": None, "docker_label": None}

    async def rerank(self, request: web.Request) -> web.Response:
        try:
            body = read_rerank_body(request.content_type, await body_text(request))
        except BodyRejected as rejected:
            return web.Response(status=rejected.status, text=str(rejected), content_type="text/plain")
        problem = self._refusal(body["texts"])
        if problem is not None:
            return problem
        if not await self.permits.run(request[RECORDED], len(body["texts"])):
            return _tei_error(429, OVERLOADED_MESSAGE, "Overloaded")
        return json_response(self._ranked(body), headers=_timing_headers(body))

    def _refusal(self, texts: list[str]) -> web.Response | None:
        """TEI's checks in its order: model kind, empty, too many."""
        if not self.reranker:
            return _tei_error(424, "model is not a re-ranker model", "Backend")
        if not texts:
            return _tei_error(400, "`texts` cannot be empty", "Empty")
        if len(texts) > self.max_client_batch_size:
            message = f"batch size {len(texts)} > maximum allowed batch size {self.max_client_batch_size}"
            return _tei_error(422, message, "Validation")
        return None

    def _ranked(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        scores = [self.scorer(body["query"], text) for text in body["texts"]]
        if body.get("raw_scores"):
            scores = [to_logit(s) for s in scores]
        items: list[dict[str, Any]] = []
        for i in best_first(scores):
            item: dict[str, Any] = {"index": i, "score": scores[i]}
            if body.get("return_text"):
                item["text"] = body["texts"][i]
            items.append(item)
        return items

    async def ok(self, request: web.Request) -> web.Response:
        return empty_response(200)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text="# tei test server\n", content_type="text/plain")


def _tei_error(status: int, message: str, error_type: str) -> web.Response:
    return json_response({"error": message, "error_type": error_type}, status)


def _timing_headers(body: dict[str, Any]) -> dict[str, str]:
    texts: list[str] = body["texts"]
    tokens = sum(pair_tokens(body["query"], text) for text in texts)
    characters = sum(len(body["query"]) + len(text) for text in texts)
    zero = {name: "0" for name in ("x-compute-time", "x-total-time", "x-tokenization-time",
                                   "x-queue-time", "x-inference-time")}
    return {**zero, "x-compute-characters": str(characters), "x-compute-tokens": str(tokens)}
