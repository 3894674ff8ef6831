"""Mixedbread reranking (its API reference): ``input``, ``top_k``, answer ``data[].score``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .hosted_app import HostedApp, Ranked, tokens_used
from .hosted_input import Fields, InputError, RerankInput
from .wire import json_response


class MixedbreadApp(HostedApp):
    """``POST /v1/reranking``: ``model`` required, strings or objects in ``input``, ``rank_fields``, ``top_k``
    (default: all), ``return_input`` (default false). Usage and errors are not verified:
    ``usage`` holds prompt/total tokens, errors are ``{"detail": ...}`` (plain choices)."""

    kind = "mixedbread"
    error_key = "detail"
    default_model = "mixedbread-ai/mxbai-rerank-large-v2"
    fields = Fields(documents="input", top="top_k", objects=True, rank_fields=True, model_required=True)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/reranking", self.rerank)]

    async def rerank(self, request: web.Request) -> web.Response:
        try:
            data = await self.read(request, self.fields)
            with_input = data.flag("return_input")
        except InputError as problem:
            return self.rejecting(problem)
        ranked = self.rank(data.query, data.texts, data.top)
        tokens = tokens_used(data.query, data.texts)
        body = {"data": [self._item(data, r, with_input) for r in ranked],
                "model": self.answer_model(data.model),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                "object": "list", "top_k": data.top or len(data.texts), "return_input": with_input}
        return json_response(body)

    @staticmethod
    def _item(data: RerankInput, item: Ranked, with_input: bool) -> dict[str, Any]:
        result: dict[str, Any] = {"index": item.index, "score": item.score}
        if with_input:
            result["input"] = data.originals[item.index]
        result["object"] = "rank_result"
        return result
