"""Voyage AI rerank (docs.voyageai.com, "Rerankers"): ``top_k`` and an answer under ``data``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .hosted_app import HostedApp, Ranked, tokens_used
from .hosted_input import Fields, InputError, RerankInput
from .scoring import Scorer, count_tokens, lexical_scorer, pair_tokens
from .wire import json_response

_LEGACY_MODELS = frozenset({"rerank-1", "rerank-lite-1"})


class VoyageApp(HostedApp):
    """``POST /v1/rerank``: ``model`` required, at most 1000 string documents, ``top_k``, ``return_documents``
    (default false), ``truncation`` (default true; false and too long -> 400).

    Options: ``api_key``, ``model``, ``max_query_tokens`` (8000, rerank-2.5), ``max_pair_tokens``
    (32000, rerank-2.5), ``max_total_tokens``: the cap on "query tokens × documents + all document
    tokens", whatever ``truncation`` says; by default the requested model's (docs.voyageai.com/reference/
    reranker-api: 600K for rerank-2.5, -2.5-lite, -2 and -2-lite, 300K for rerank-1 and rerank-lite-1).
    Errors are not documented: ``{"detail": ...}``, a plain choice.
    """

    kind = "voyage"
    error_key = "detail"
    default_model = "rerank-2.5"
    fields = Fields(top="top_k", max_documents=1000, model_required=True)

    def __init__(self, *, scorer: Scorer = lexical_scorer, api_key: str | None = None,
                 model: str | None = None, max_query_tokens: int = 8000, max_pair_tokens: int = 32000,
                 max_total_tokens: int | None = None) -> None:
        super().__init__(scorer=scorer, api_key=api_key, model=model)
        self.max_query_tokens = max_query_tokens
        self.max_pair_tokens = max_pair_tokens
        self.max_total_tokens = max_total_tokens

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/rerank", self.rerank)]

    async def rerank(self, request: web.Request) -> web.Response:
        try:
            data = await self.read(request, self.fields)
            with_docs = data.flag("return_documents")
            self._check_lengths(data, truncation=data.flag("truncation", True))
        except InputError as problem:
            return self.rejecting(problem)
        ranked = self.rank(data.query, data.texts, data.top)
        body = {"object": "list", "data": [self._item(data, r, with_docs) for r in ranked],
                "model": self.answer_model(data.model),
                "usage": {"total_tokens": tokens_used(data.query, data.texts)}}
        return json_response(body)

    def _check_lengths(self, data: RerankInput, truncation: bool) -> None:
        total, cap = tokens_used(data.query, data.texts), self.max_total_tokens
        if cap is None:
            cap = 300_000 if (data.model or self.model) in _LEGACY_MODELS else 600_000
        if total > cap:
            raise InputError(f"request has {total} tokens, more than the limit of {cap}")
        if truncation:
            return
        if count_tokens(data.query) > self.max_query_tokens:
            raise InputError(f"query is longer than {self.max_query_tokens} tokens and truncation is false")
        for i, text in enumerate(data.texts):
            if pair_tokens(data.query, text) > self.max_pair_tokens:
                raise InputError(f"query and document {i} exceed {self.max_pair_tokens} tokens "
                                 "and truncation is false")

    @staticmethod
    def _item(data: RerankInput, item: Ranked, with_docs: bool) -> dict[str, Any]:
        result: dict[str, Any] = {"relevance_score": item.score, "index": item.index}
        if with_docs:
            result["document"] = data.texts[item.index]
        return result
