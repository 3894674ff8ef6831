"""Cohere Rerank v1 and v2 (docs.cohere.com/reference/rerank; cohere-python's ``v2/raw_client.py``)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .hosted_app import HostedApp, Ranked, result_item
from .hosted_input import Fields, InputError, RerankInput, document_object
from .scoring import Scorer, chars_for_tokens, lexical_scorer
from .wire import bearer_token, is_int, json_response, uuid_id

_V1 = Fields(objects=True, rank_fields=True)
_V2 = Fields(model_required=True)
_V2_DEFAULT_MAX_TOKENS_PER_DOC = 4096


class CohereApp(HostedApp):
    """``POST /v1/rerank`` and ``/v2/rerank``; errors are ``{"message": ...}``.

    Options: ``api_key``; ``invalid_token_status`` 401 (default) or 498, the status for a wrong key;
    ``model``. v2 takes strings only, needs ``model``, truncates documents to
    ``max_tokens_per_doc`` (default 4096) and, as since the 2025-07-09 SDK, never returns documents.
    Not documented, so plain: unknown routes 404 ``{"message": "Not Found"}``; ``top_n`` < 1 is 400.
    """

    kind = "cohere"
    error_key = "message"
    default_model = "rerank-v3.5"

    def __init__(self, *, scorer: Scorer = lexical_scorer, api_key: str | None = None,
                 model: str | None = None, invalid_token_status: int = 401) -> None:
        super().__init__(scorer=scorer, api_key=api_key, model=model)
        if invalid_token_status not in (401, 498):
            raise ValueError("invalid_token_status must be 401 or 498")
        self.invalid_token_status = invalid_token_status

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/rerank", self.rerank_v1), web.post("/v2/rerank", self.rerank_v2)]

    def unauthorized(self, request: web.Request) -> web.Response:
        if bearer_token(request) is None:
            return self.error(401, "no api key supplied")
        return self.error(self.invalid_token_status, "invalid api token")

    def rejecting(self, problem: InputError) -> web.Response:
        return self.error(400, f"invalid request: {problem}")

    async def rerank_v1(self, request: web.Request) -> web.Response:
        try:
            data = await self.read(request, _V1)
            with_docs = data.flag("return_documents")
        except InputError as problem:
            return self.rejecting(problem)
        ranked = self.rank(data.query, data.texts, data.top)
        return json_response(self._answer(data, ranked, "1", with_docs))

    async def rerank_v2(self, request: web.Request) -> web.Response:
        try:
            data = await self.read(request, _V2)
            limit = _max_tokens_per_doc(data.body)
        except InputError as problem:
            return self.rejecting(problem)
        texts = [text[: chars_for_tokens(limit)] for text in data.texts]
        ranked = self.rank(data.query, texts, data.top)
        return json_response(self._answer(data, ranked, "2", with_docs=False))

    def _answer(self, data: RerankInput, ranked: list[Ranked], version: str, with_docs: bool) -> dict[str, Any]:
        results = [result_item(r, document_object(data.originals[r.index]), with_document=with_docs)
                   for r in ranked]
        meta = {"api_version": {"version": version}, "billed_units": {"search_units": 1}}
        return {"id": uuid_id(), "results": results, "meta": meta}


def _max_tokens_per_doc(body: dict[str, Any]) -> int:
    value = body.get("max_tokens_per_doc", _V2_DEFAULT_MAX_TOKENS_PER_DOC)
    if not is_int(value) or value < 1:
        raise InputError("max_tokens_per_doc must be a positive integer")
    return value
