"""Jina-schema rerank APIs: Jina itself (section 2) and LocalAI (section 8), ``POST /v1/rerank``."""

from __future__ import annotations

from aiohttp import web

from .hosted_app import HostedApp, result_item, tokens_used
from .hosted_input import Fields, InputError, RerankInput
from .wire import json_response


class JinaApp(HostedApp):
    """Jina: strings or ``{"text": ...}`` objects; ``return_documents`` defaults to false (the
    behaviour since late 2025). Errors are not documented: ``{"detail": ...}``, a plain choice."""

    kind = "jina"
    error_key = "detail"
    default_model = "jina-reranker-v2-base-multilingual"
    fields = Fields(objects=True)
    documents_by_default = False

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/rerank", self.rerank)]

    async def rerank(self, request: web.Request) -> web.Response:
        try:
            data = await self.read(request, self.fields)
            with_docs = data.flag("return_documents", self.documents_by_default)
        except InputError as problem:
            return self.rejecting(problem)
        ranked = self.rank(data.query, data.texts, data.top)
        results = [result_item(r, {"text": data.texts[r.index]}, with_document=with_docs) for r in ranked]
        return json_response({"model": self.answer_model(data.model), "usage": self.usage(data),
                              "results": results})

    def usage(self, data: RerankInput) -> dict[str, int]:
        return {"total_tokens": tokens_used(data.query, data.texts)}


class LocalAIApp(JinaApp):
    """LocalAI: the Jina schema with string documents; documents always come back; usage has
    ``total_tokens`` and ``prompt_tokens``. Errors (undocumented) use an OpenAI-like
    ``{"error": {"code", "message", "type"}}``, a plain choice."""

    kind = "localai"
    default_model = "jina-reranker-v1-base-en"
    fields = Fields()
    documents_by_default = True

    def error(self, status: int, message: str) -> web.Response:
        return json_response({"error": {"code": status, "message": message, "type": ""}}, status)

    def usage(self, data: RerankInput) -> dict[str, int]:
        tokens = tokens_used(data.query, data.texts)
        return {"total_tokens": tokens, "prompt_tokens": tokens}
