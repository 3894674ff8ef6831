"""vLLM's pooling server: rerank and score (vLLM's ``entrypoints/pooling/score`` router and
protocol; answers of vLLM 0.32.0 captured on loopback)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .protocol_app import ProtocolApp
from .qwen3_judge import DEFAULT_INSTRUCTION, TemplatedQwen3Scorer, Untemplated, UntemplatedQwen3Scorer, render
from .ranking import best_first, cut
from .scoring import Scorer, chars_for_tokens, lexical_scorer, pair_tokens, to_logit
from .vllm_answers import ErrorStyle, error, route_miss, unauthorized
from .vllm_input import (
    EMPTY_PAIRS,
    Shared,
    VllmRejected,
    read_body,
    read_rerank,
    read_score,
    score_pairs,
)
from .wire import body_text, empty_response, hex_id, json_response, key_accepted, unix_now

_KEYED_PREFIXES = ("/v1", "/v2", "/inference")


class VllmApp(ProtocolApp):
    """vLLM serving one score/rerank model.

    Options: ``error_style`` "new" (since v0.10.1: nested errors, nested 404, all /score field
    forms, ``multi_modal: null`` in documents, full usage) or "old" (flat errors, FastAPI 404,
    ``text_1``/``text_2`` only, ``usage: {"total_tokens"}`` on rerank); ``model`` (served name);
    ``max_model_len`` (512 tokens); ``api_key`` (checked only under /v1, /v2, /inference, before
    routing, so an unknown /v1 path without the key is 401 too); ``version``.
    """

    kind = "vllm"
    default_model = "minilm-l6-ce"
    default_max_model_len = 512

    def __init__(self, *, scorer: Scorer = lexical_scorer, error_style: ErrorStyle = "new",
                 model: str | None = None, max_model_len: int | None = None,
                 api_key: str | None = None, version: str | None = None) -> None:
        super().__init__(scorer=scorer)
        if error_style not in ("new", "old"):
            raise ValueError("error_style must be 'new' or 'old'")
        self.style: ErrorStyle = error_style
        self.model = model or self.default_model
        self.max_model_len = max_model_len or self.default_max_model_len
        self.api_key = api_key
        self.version = version or ("0.32.0" if error_style == "new" else "0.10.0")

    def routes(self) -> list[web.RouteDef]:
        rerank = [web.post(path, self.rerank) for path in ("/rerank", "/v1/rerank", "/v2/rerank")]
        score = [web.post(path, self.score) for path in ("/score", "/v1/score")]
        gets = [web.get("/v1/models", self.models), web.get("/version", self.version_info),
                web.get("/health", self.ok), web.get("/ping", self.ok), web.post("/ping", self.ok),
                web.get("/metrics", self.metrics)]
        return [*rerank, *score, *gets]

    def guard(self, request: web.Request, matched: bool) -> web.StreamResponse | None:
        """vLLM's auth middleware runs before routing and covers only the keyed prefixes."""
        keyed = any(request.path == p or request.path.startswith(p + "/") for p in _KEYED_PREFIXES)
        return unauthorized() if keyed and not key_accepted(request, self.api_key) else None

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        return route_miss(self.style, status)

    async def rerank(self, request: web.Request) -> web.Response:
        try:
            body = read_body(await body_text(request))
            query, documents, top_n, shared = read_rerank(body)
            self._check_model(shared.model)
            if not documents:
                raise VllmRejected(400, EMPTY_PAIRS, "BadRequestError")
            scores = self._scores([(query, doc) for doc in documents], shared)
        except VllmRejected as rejected:
            return self._refuse(rejected)
        order = cut(best_first(scores), top_n if 0 < top_n < len(documents) else None)
        results = [{"index": i, "document": self._document(documents[i]), "relevance_score": scores[i]}
                   for i in order]
        tokens = sum(pair_tokens(query, doc) for doc in documents)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens} if self.style == "new" else {"total_tokens": tokens}
        return json_response({"id": hex_id("score-"), "model": self.model, "usage": usage, "results": results})

    async def score(self, request: web.Request) -> web.Response:
        try:
            body = read_body(await body_text(request))
            left, right, shared = read_score(body, newest=self.style == "new")
            self._check_model(shared.model)
            pairs = score_pairs(left, right)
            scores = self._scores(pairs, shared)
        except VllmRejected as rejected:
            return self._refuse(rejected)
        data = [{"index": i, "object": "score", "score": s} for i, s in enumerate(scores)]
        return json_response({"id": hex_id("score-"), "object": "list", "created": unix_now(),
                              "model": self.model, "data": data, "usage": self._score_usage(pairs)})

    def _score_usage(self, pairs: list[tuple[str, str]]) -> dict[str, Any]:
        tokens = sum(pair_tokens(a, b) for a, b in pairs)
        usage: dict[str, Any] = {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0,
                                 "prompt_tokens_details": None}
        if self.style == "new":
            usage["completion_tokens_details"] = None
        return usage

    def _check_model(self, requested: str | None) -> None:
        if requested is not None and requested != self.model:
            raise VllmRejected(404, f"The model `{requested}` does not exist.", "NotFoundError")

    def _scores(self, pairs: list[tuple[str, str]], shared: Shared) -> list[float]:
        """Check or truncate each prompt to the context, then score it (sigmoid unless disabled)."""
        fitted = [self._fit(query, doc, shared) for query, doc in pairs]
        scores = [self.scorer(query, doc) for query, doc in fitted]
        return scores if shared.use_activation else [to_logit(s) for s in scores]

    def _fit(self, query: str, doc: str, shared: Shared) -> tuple[str, str]:
        """Without truncate_prompt_tokens a too-long prompt is 400; with it the whole prompt is cut
        (so a template's suffix can be lost). A limit above max_model_len is capped (plain choice)."""
        if shared.truncate_prompt_tokens is None:
            if pair_tokens(query, doc) > self.max_model_len:
                raise VllmRejected(400, self._too_long_message(), "BadRequestError", "input_tokens")
            return query, doc
        limit = shared.truncate_prompt_tokens
        limit = self.max_model_len if limit == -1 else min(limit, self.max_model_len)
        return _truncated(query, doc, chars_for_tokens(limit), shared.truncation_side)

    def _too_long_message(self) -> str:
        """vLLM tokenizes with a cap of max_model_len + 1, hence "at least" that many."""
        return (f"This model's maximum context length is {self.max_model_len} tokens. However, your "
                f"prompt contains at least {self.max_model_len + 1} input tokens.")

    def _document(self, text: str) -> dict[str, Any]:
        return {"text": text, "multi_modal": None} if self.style == "new" else {"text": text}

    def _refuse(self, rejected: VllmRejected) -> web.Response:
        return error(self.style, rejected.status, str(rejected), rejected.kind, rejected.param)

    async def models(self, request: web.Request) -> web.Response:
        created = unix_now()
        permission = {"id": hex_id("modelperm-"), "object": "model_permission", "created": created,
                      "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                      "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                      "organization": "*", "group": None, "is_blocking": False}
        entry = {"id": self.model, "object": "model", "created": created, "owned_by": "vllm",
                 "root": self.model, "parent": None, "max_model_len": self.max_model_len,
                 "permission": [permission]}
        return json_response({"object": "list", "data": [entry]})

    async def version_info(self, request: web.Request) -> web.Response:
        return json_response({"version": self.version})

    async def ok(self, request: web.Request) -> web.Response:
        return empty_response(200)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text="# vllm test server\n", content_type="text/plain")


class VllmQwen3App(VllmApp):
    """vLLM serving Qwen3-Reranker with no template: it scores ``query + document`` as one text.

    Meaningful scores only for the exact official judge prompt (see qwen3_judge). Extra option:
    ``untemplated`` "random" (default) or "inverted". ``max_model_len`` defaults to 8192, the
    official code's max_length.
    """

    kind = "vllm_qwen3"
    default_model = "Qwen/Qwen3-Reranker-0.6B"
    default_max_model_len = 8192

    def __init__(self, *, scorer: Scorer = lexical_scorer, untemplated: Untemplated = "random",
                 **options: Any) -> None:
        super().__init__(scorer=UntemplatedQwen3Scorer(scorer, untemplated), **options)


class VllmQwen3TemplatedApp(VllmApp):
    """vLLM serving Qwen3-Reranker started with ``--chat-template`` for its score template.

    Every (query, document) pair of ``/rerank`` and ``/score`` is rendered into the judge prompt with
    the request's ``instruction`` (the template's default when absent) and the whole rendered prompt
    is judged (``TemplatedQwen3Scorer``), so raw texts on ``/rerank`` rank well, a client-templated
    pair is wrapped twice and ranks with less confidence, and ``truncate_prompt_tokens`` cuts the
    rendered prompt (its suffix too).
    """

    kind = "vllm_qwen3_templated"
    default_model = "Qwen/Qwen3-Reranker-0.6B"
    default_max_model_len = 8192

    def __init__(self, *, scorer: Scorer = lexical_scorer, **options: Any) -> None:
        super().__init__(scorer=scorer, **options)
        self.judge = TemplatedQwen3Scorer(scorer)

    def _scores(self, pairs: list[tuple[str, str]], shared: Shared) -> list[float]:
        instruction = shared.instruction if shared.instruction is not None else DEFAULT_INSTRUCTION
        prompts = [self._fit(render(query, doc, instruction), "", shared) for query, doc in pairs]
        scores = [self.judge.score_prompt(prompt) for prompt, _ in prompts]
        return scores if shared.use_activation else [to_logit(s) for s in scores]


def _truncated(query: str, doc: str, limit: int, side: str) -> tuple[str, str]:
    """Cut the joined prompt to ``limit`` characters, keeping its start (right) or end (left)."""
    if len(query) + len(doc) <= limit:
        return query, doc
    if side == "left":
        if len(doc) >= limit:
            return "", doc[len(doc) - limit :]
        return query[len(query) - (limit - len(doc)) :], doc
    if len(query) >= limit:
        return query[:limit], ""
    return query, doc[: limit - len(query)]
