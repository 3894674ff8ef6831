"""A LiteLLM proxy in front of a reranker: Cohere's rerank API on three routes, OpenAI's model listing.

What it reproduces, from LiteLLM's docs ("LiteLLM follows the cohere api request / response for the
rerank api") and source (``litellm/proxy/...`` in BerriAI/litellm):

- ``POST /rerank``, ``/v1/rerank`` and ``/v2/rerank``: one handler (``rerank_endpoints/endpoints.py``)
  behind ``user_api_key_auth``. Body: ``model`` (a ``model_name`` of the proxy's config), ``query``,
  ``documents`` (strings or objects), optional ``top_n``, ``rank_fields``, ``return_documents``.
  Answer: ``RerankResponse`` ``{"id", "results": [{"index", "relevance_score"(, "document")}], "meta"}``
  (``litellm/types/rerank.py``), here with a Cohere backend's ``meta``.
- ``GET /v1/models`` and ``GET /models`` (auth too): ``{"data": [{"id": <model_name>, "object": "model",
  "created": 1677610602, "owned_by": "openai"}], "object": "list"}``: ``owned_by`` is always "openai"
  (``create_model_info_response`` is called with provider "openai"), so the listing does not name LiteLLM.
- Every error is a ``ProxyException``: ``{"error": {"message", "type", "param", "code": "<status>"}}``
  with that status (``proxy_server.openai_exception_handler``, ``ProxyException.to_dict``).
  - no key while a master key is set: 401 ``Authentication Error, No api key passed in.``, type
    ``auth_error``, param ``"None"``; a header without ``Bearer ``: 401 ``Authentication Error,
    Malformed API Key passed in. Ensure Key has `Bearer ` prefix.``;
  - a wrong key on a proxy without a key database (``auth_style="current"``): 400 ``No connected db.``,
    type ``no_db_connection``, param null. Older proxies (``auth_style="legacy"``) answered 401
    ``Authentication Error, LiteLLM Virtual Key expected. Received=<the key>, expected to start with
    'sk-'.`` (the key echoed back) and, for an ``sk-`` key, 401 ``Authentication Error, No connected db.``;
  - a missing ``query``, ``documents`` or ``model``: 400 ``/rerank: Missing required parameter: '<name>'.``,
    type ``invalid_request_error``, param ``<name>`` (``route_llm_request.py``);
  - an unknown model: 400 ``400: {'error': '/rerank: Invalid model name passed in model=<m>. Call
    `/v1/models` to view available models for your key.'}`` (``ProxyModelNotFoundError``, an
    HTTPException whose ``str`` the endpoint wraps), type ``invalid_request_error``, param null;
  - a body that is not JSON: 500, type ``internal_server_error`` (orjson's error, no status of its own).
- Unknown routes and methods are FastAPI's: 404 ``{"detail": "Not Found"}``, 405 ``{"detail": "Method
  Not Allowed"}``, without an auth check (the auth is a route dependency).

Plain choices (LiteLLM passes these to the provider, whose wording varies): other invalid bodies get
400 ``litellm.BadRequestError: <problem>``, type ``invalid_request_error``.
"""

from __future__ import annotations

from typing import Any, Literal

from aiohttp import web

from .hosted_app import HostedApp, Ranked, result_item
from .hosted_input import Fields, InputError, RerankInput, document_object, read_input
from .scoring import Scorer, lexical_scorer
from .wire import ParsedJson, body_text, json_response, parse_json, uuid_id

AuthStyle = Literal["current", "legacy"]

ROUTES = ("/rerank", "/v1/rerank", "/v2/rerank")
LISTING_CREATED = 1677610602  # DEFAULT_MODEL_CREATED_AT_TIME
_FIELDS = Fields(objects=True, rank_fields=True)
_REQUIRED = ("query", "documents")  # checked first (REQUIRED_PRESENT_BODY_PARAMS_BY_ROUTE["arerank"])
_MODELS_HINT = "Call `/v1/models` to view available models for your key."


class LiteLLMApp(HostedApp):
    """A LiteLLM proxy serving rerank models by ``model_name``.

    Options: ``api_key`` (the master key; None: an open proxy), ``models`` (the ``model_name`` entries
    of its config, listed in this order), ``auth_style`` "current" or "legacy" (see the module text).
    """

    kind = "litellm"
    default_model = "rerank-english-v3.0"

    def __init__(self, *, scorer: Scorer = lexical_scorer, api_key: str | None = None,
                 models: tuple[str, ...] | None = None, auth_style: AuthStyle = "current") -> None:
        super().__init__(scorer=scorer, api_key=api_key, model=(models or (None,))[0])
        if auth_style not in ("current", "legacy"):
            raise ValueError("auth_style must be 'current' or 'legacy'")
        self.models = models or (self.model,)
        self.auth_style = auth_style

    def routes(self) -> list[web.RouteDef]:
        reranks = [web.post(path, self.rerank) for path in ROUTES]
        listings = [web.get(path, self.listing) for path in ("/v1/models", "/models")]
        return [*reranks, *listings, web.get("/health/liveliness", self.alive)]

    # --- errors -----------------------------------------------------------------------------

    def proxy_error(self, status: int, message: str, kind: str, param: str | None = "None") -> web.Response:
        """``ProxyException.to_dict()`` under ``error``; ``code`` is the status as a string."""
        error = {"message": message, "type": kind, "param": param, "code": str(status)}
        return json_response({"error": error}, status)

    def error(self, status: int, message: str) -> web.Response:
        return self.proxy_error(status, message, "invalid_request_error", None)

    def guard(self, request: web.Request, matched: bool) -> web.StreamResponse | None:
        if not matched or self.api_key is None or request.path == "/health/liveliness":
            return None
        header = request.headers.get("Authorization", "")
        if not header:
            return self.proxy_error(401, "Authentication Error, No api key passed in.", "auth_error")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return self.proxy_error(401, "Authentication Error, Malformed API Key passed in. Ensure Key has "
                                         "`Bearer ` prefix.", "auth_error")
        return None if key.strip() == self.api_key else self._wrong_key(key.strip())

    def _wrong_key(self, key: str) -> web.Response:
        if self.auth_style == "current":
            return self.proxy_error(400, "No connected db.", "no_db_connection", None)
        if not key.startswith("sk-"):
            message = f"LiteLLM Virtual Key expected. Received={key}, expected to start with 'sk-'."
            return self.proxy_error(401, f"Authentication Error, {message}", "auth_error")
        return self.proxy_error(401, "Authentication Error, No connected db.", "auth_error")

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        return json_response({"detail": "Not Found" if status == 404 else "Method Not Allowed"}, status)

    # --- routes -----------------------------------------------------------------------------

    async def alive(self, request: web.Request) -> web.Response:
        return json_response("I'm alive!")

    async def listing(self, request: web.Request) -> web.Response:
        data = [{"id": name, "object": "model", "created": LISTING_CREATED, "owned_by": "openai"}
                for name in self.models]
        return json_response({"data": data, "object": "list"})

    async def rerank(self, request: web.Request) -> web.Response:
        parsed = parse_json(await body_text(request))
        refusal = self._refusal(parsed)
        if refusal is not None:
            return refusal
        try:
            data = read_input(parsed, _FIELDS)
            with_docs = data.flag("return_documents")
        except InputError as problem:
            return self.error(400, f"litellm.BadRequestError: {problem}")
        ranked = self.rank(data.query, data.texts, data.top)
        headers = {"x-litellm-call-id": uuid_id(), "x-litellm-model-group": str(data.model)}
        return json_response(self._answer(data, ranked, with_docs), headers=headers)

    def _refusal(self, parsed: ParsedJson) -> web.Response | None:
        """What the proxy itself rejects before any provider sees the request."""
        if not parsed.ok:
            return self.proxy_error(500, str(parsed.error), "internal_server_error", None)
        body = parsed.value
        if not isinstance(body, dict):
            return self.error(400, "litellm.BadRequestError: request body must be a JSON object")
        missing = next((name for name in (*_REQUIRED, "model") if name not in body), None)
        if missing is not None:
            return self.proxy_error(400, f"/rerank: Missing required parameter: '{missing}'.",
                                    "invalid_request_error", missing)
        if body["model"] not in self.models:
            detail = f"/rerank: Invalid model name passed in model={body['model']}. {_MODELS_HINT}"
            return self.error(400, f"400: {{'error': '{detail}'}}")
        return None

    def _answer(self, data: RerankInput, ranked: list[Ranked], with_docs: bool) -> dict[str, Any]:
        results = [result_item(r, document_object(data.originals[r.index]), with_document=with_docs)
                   for r in ranked]
        meta = {"api_version": {"version": "1"}, "billed_units": {"search_units": 1}}
        return {"id": uuid_id(), "results": results, "meta": meta}
