"""The hostile servers of issue 15: real loopback servers with a fault that answers in a way built to
break a reader. Each was found to raise an internal error (and log a traceback) before: a score that is
an integer too large for a float, a FastAPI ``detail`` whose ``loc`` is a number, JSON nested 100,000
levels deep, a ``/models`` listing with an entry that is no object or ``capabilities`` that are a number.

``HOSTILE_SERVERS`` maps a name to the server kind and the rule that makes it hostile; the service
tests and the CLI tests (``a0-reranker probe``) both use them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web
from reliability.answer_faults import MUTATIONS, DamagedAnswer

from support.servers import FaultRule, Respond

NESTED_100000: Final = b"[" * 100_000 + b"]" * 100_000


def _listing(entry_capabilities: object, *extra: object) -> dict[str, object]:
    model = {"id": "minilm-l6-ce", "object": "model", "owned_by": "infinity", "capabilities": entry_capabilities}
    return {"object": "list", "data": [model, *extra]}


MODELS_ENTRY_NOT_AN_OBJECT: Final = _listing(["rerank"], 7)
MODELS_CAPABILITIES_AN_INTEGER: Final = _listing(5)
LISTING_PATHS: Final = frozenset({"/models", "/v1/models"})


def on_posts(fault: object) -> FaultRule:
    return lambda request: fault if request.method == "POST" else None  # type: ignore[return-value]


def on_everything(fault: object) -> FaultRule:
    return lambda _request: fault  # type: ignore[return-value]


def on_listings(fault: object, paths: frozenset[str] = LISTING_PATHS) -> FaultRule:
    """``fault`` on the GETs of the model listing (only on ``paths``: the ones the server really has)."""
    return lambda request: fault if request.method == "GET" and request.path in paths else None  # type: ignore[return-value]


HOSTILE_SERVERS: Final[Mapping[str, tuple[str, FaultRule]]] = {
    "score_integer_10e400": ("vllm", on_posts(DamagedAnswer(MUTATIONS["score_integer_too_large_for_a_float"]))),
    "detail_loc_is_a_number": ("vllm", on_posts(Respond(422, {"detail": [{"loc": 5, "msg": "Field required"}]}))),
    "json_nested_100000_deep": ("vllm", on_everything(Respond(200, NESTED_100000, "application/json"))),
    # Answering every request with its listing: the probe's POSTs get it too, so nothing can rerank here.
    "models_entry_not_an_object": ("infinity", on_everything(Respond(200, MODELS_ENTRY_NOT_AN_OBJECT))),
    "models_capabilities_an_integer": ("infinity", on_everything(Respond(200, MODELS_CAPABILITIES_AN_INTEGER))),
}


@dataclass(frozen=True)
class ReflectAuthorizationIntoModels:
    """A careless proxy: its model listing names the model after the Authorization header it was sent."""

    owner: str = "llamacpp"

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        bearer = request.headers.get("Authorization", "")
        models = [{"id": f"{bearer} (reflected)", "object": "model", "owned_by": self.owner}]
        return web.json_response({"object": "list", "data": models})
