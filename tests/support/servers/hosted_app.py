"""Shared plumbing of the hosted-style rerank APIs: bearer auth, one error shape, ranking.

These APIs' references give their request and answer fields but little of their errors, so:
auth failures are 401, invalid requests 400, unknown routes 404/405, each as
``{<error_key>: message}`` (a plain choice, documented per API).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .hosted_input import Fields, InputError, RerankInput, read_input
from .protocol_app import ProtocolApp
from .ranking import best_first, cut
from .scoring import Scorer, lexical_scorer, pair_tokens
from .wire import body_text, json_response, key_accepted, parse_json


@dataclass(frozen=True)
class Ranked:
    """One result: the document's input index and its relevance."""

    index: int
    score: float


class HostedApp(ProtocolApp):
    """A hosted rerank API: ``api_key`` (None = open), ``model`` (the name echoed back)."""

    error_key = "detail"
    default_model = "rerank-model"

    def __init__(self, *, scorer: Scorer = lexical_scorer, api_key: str | None = None,
                 model: str | None = None) -> None:
        super().__init__(scorer=scorer)
        self.api_key = api_key
        self.model = model or self.default_model

    def error(self, status: int, message: str) -> web.Response:
        return json_response({self.error_key: message}, status)

    def guard(self, request: web.Request, matched: bool) -> web.StreamResponse | None:
        if matched and not key_accepted(request, self.api_key):
            return self.unauthorized(request)
        return None

    def unauthorized(self, request: web.Request) -> web.Response:
        return self.error(401, "Unauthorized")

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        return self.error(status, "Not Found" if status == 404 else "Method Not Allowed")

    async def read(self, request: web.Request, fields: Fields) -> RerankInput:
        """The validated request; raises InputError (turned into a 400 by :meth:`rejecting`)."""
        return read_input(parse_json(await body_text(request)), fields)

    def rank(self, query: str, texts: list[str], top: int | None) -> list[Ranked]:
        """Score every text, best first, cut to ``top``."""
        scores = [self.scorer(query, text) for text in texts]
        return [Ranked(i, scores[i]) for i in cut(best_first(scores), top)]

    def rejecting(self, problem: InputError) -> web.Response:
        return self.error(400, str(problem))

    def answer_model(self, requested: str | None) -> str:
        return requested or self.model


def result_item(item: Ranked, document: Any = None, *, with_document: bool = False) -> dict[str, Any]:
    """``{"index", "relevance_score"}`` plus ``document`` when asked: the Cohere-style result."""
    result: dict[str, Any] = {"index": item.index, "relevance_score": item.score}
    if with_document:
        result["document"] = document
    return result


def tokens_used(query: str, texts: list[str]) -> int:
    """Prompt tokens of a request under the stand-in count."""
    return sum(pair_tokens(query, text) for text in texts)
