"""Cohere-compatible rerank APIs (each one's API reference): Together, Xinference, SiliconFlow.

All serve ``POST /v1/rerank``. Their error bodies are not documented: Together and SiliconFlow use
Cohere's ``{"message": ...}``, Xinference (a FastAPI app) ``{"detail": ...}`` — plain choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiohttp import web

from .hosted_app import HostedApp, Ranked, result_item, tokens_used
from .hosted_input import Fields, InputError, RerankInput, document_object
from .wire import body_text, hex_id, json_response, parse_json, uuid_id


class CohereCompatibleApp(HostedApp):
    """One ``/v1/rerank`` route; subclasses shape the answer."""

    fields = Fields()

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/rerank", self.rerank)]

    async def rerank(self, request: web.Request) -> web.Response:
        try:
            data = await self.read(request, self.fields)
            with_docs = data.flag("return_documents")
        except InputError as problem:
            return self.rejecting(problem)
        return json_response(self.answer(data, self.rank(data.query, data.texts, data.top), with_docs))

    def answer(self, data: RerankInput, ranked: list[Ranked], with_docs: bool) -> dict[str, Any]:
        raise NotImplementedError


class TogetherApp(CohereCompatibleApp):
    """Together: strings or objects, ``rank_fields``; every result carries ``document`` (null
    unless ``return_documents``, a plain choice); ``usage`` in OpenAI's shape."""

    kind = "together"
    error_key = "message"
    default_model = "Salesforce/Llama-Rank-V1"
    fields = Fields(objects=True, rank_fields=True)

    def answer(self, data: RerankInput, ranked: list[Ranked], with_docs: bool) -> dict[str, Any]:
        tokens = tokens_used(data.query, data.texts)
        results = [result_item(r, document_object(data.originals[r.index]) if with_docs else None,
                               with_document=True) for r in ranked]
        usage = {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens}
        return {"object": "rerank", "id": uuid_id(), "model": self.answer_model(data.model),
                "results": results, "usage": usage}


class XinferenceApp(CohereCompatibleApp):
    """Xinference: ``model`` (the model UID) required; ``document`` is ``{"text"}`` or null;
    ``meta`` as Xinference fills it (no api_version or billed units).

    ``GET /v1/models`` lists every running model, in launch order, each with ``owned_by: "xinference"`` and the
    supervisor's model info, which holds its ``model_type`` ("LLM", "embedding", "rerank", ...) (xorbitsai/inference
    ``xinference/api/restful_api.py`` ``list_models``). Options: ``other_models``, ``(uid, model_type)`` pairs running
    before the reranker; a rerank sent to one of them is the 500 ``{"detail": "Model ... is not for reranking."}``
    of ``ModelActor.rerank``'s AttributeError, which the rerank route raises as an HTTPException(500).
    """

    kind = "xinference"
    error_key = "detail"
    default_model = "bge-reranker-v2-m3"
    fields = Fields(objects=True, model_required=True)

    def __init__(self, *, other_models: Sequence[tuple[str, str]] = (), **options: Any) -> None:
        super().__init__(**options)
        self.other_models = tuple(other_models)

    def routes(self) -> list[web.RouteDef]:
        return [*super().routes(), web.get("/v1/models", self.models)]

    async def rerank(self, request: web.Request) -> web.Response:
        parsed = parse_json(await body_text(request))
        requested = parsed.value.get("model") if isinstance(parsed.value, dict) else None
        if requested in {uid for uid, _ in self.other_models}:
            return self.error(500, f"Model {requested} is not for reranking.")
        return await super().rerank(request)

    async def models(self, request: web.Request) -> web.Response:
        running = [*self.other_models, (self.model, "rerank")]
        data = [{"id": uid, "object": "model", "created": 0, "owned_by": "xinference", "model_type": model_type}
                for uid, model_type in running]
        return json_response({"object": "list", "data": data})

    def answer(self, data: RerankInput, ranked: list[Ranked], with_docs: bool) -> dict[str, Any]:
        results = [result_item(r, {"text": data.texts[r.index]} if with_docs else None, with_document=True)
                   for r in ranked]
        tokens = {"input_tokens": tokens_used(data.query, data.texts), "output_tokens": 0}
        meta = {"api_version": None, "billed_units": None, "tokens": tokens, "warnings": None}
        return {"id": hex_id("", 32), "results": results, "meta": meta}


class SiliconFlowApp(CohereCompatibleApp):
    """SiliconFlow: Cohere fields plus ``instruction`` (accepted; the scorer has no instruction
    input) and chunking options (accepted, ignored); usage is reported as ``tokens``."""

    kind = "siliconflow"
    error_key = "message"
    default_model = "Qwen/Qwen3-Reranker-8B"

    def answer(self, data: RerankInput, ranked: list[Ranked], with_docs: bool) -> dict[str, Any]:
        results = [result_item(r, {"text": data.texts[r.index]}, with_document=with_docs) for r in ranked]
        tokens = {"input_tokens": tokens_used(data.query, data.texts), "output_tokens": 0}
        return {"id": uuid_id(), "results": results, "tokens": tokens}
