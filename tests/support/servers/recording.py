"""What a test server saw: one frozen record per request."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from .wire import body_text, parse_json


@dataclass(frozen=True)
class RecordedRequest:
    """One request as it arrived: ``json`` is None when the body was empty or not valid JSON."""

    method: str
    path: str
    headers: CIMultiDictProxy[str]
    json: Any
    text: str
    query: dict[str, str] = field(default_factory=dict)
    received_at: float = field(default_factory=time.monotonic)  # when the server read it


async def record(request: web.Request) -> RecordedRequest:
    """Snapshot the request (headers copied, body read once and cached by aiohttp)."""
    text = await body_text(request)
    parsed = parse_json(text) if text else None
    return RecordedRequest(
        method=request.method,
        path=request.path,
        headers=CIMultiDictProxy(CIMultiDict(request.headers)),
        json=parsed.value if parsed is not None and parsed.ok else None,
        text=text,
        query=dict(request.query),
    )


# The snapshot the server took of a request, kept in the request for its handler. aiohttp 3.14 wants a typed key
# (web.RequestKey, new in 3.14: a plain name warns); older versions take the plain name.
RECORDED: Any = web.RequestKey("a0r_recorded", RecordedRequest) if hasattr(web, "RequestKey") else "a0r_recorded"
