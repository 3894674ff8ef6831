"""The shape every server kind fills in: its routes, its pre-routing guard, its route-miss answer."""

from __future__ import annotations

from aiohttp import web

from .scoring import Scorer, lexical_scorer


class ProtocolApp:
    """One reranker server's wire behaviour; the runtime adds recording, gate and faults around it."""

    kind = "base"

    def __init__(self, *, scorer: Scorer = lexical_scorer) -> None:
        self.scorer = scorer

    def routes(self) -> list[web.RouteDef]:
        """The routes this server answers."""
        raise NotImplementedError

    def guard(self, request: web.Request, matched: bool) -> web.StreamResponse | None:
        """Answer before routing (auth); ``matched`` says whether a route exists. None = go on."""
        return None

    def route_miss(self, request: web.Request, status: int) -> web.StreamResponse:
        """Answer for no such route (404) or no such method on a route (405)."""
        raise NotImplementedError
