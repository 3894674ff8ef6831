"""Faults a test can inject into any server kind, decided per request.

``server.set_fault(fn)`` takes ``fn(RecordedRequest) -> Fault | None`` (or one Fault for every
request). A fault replaces or precedes the server's normal answer. Waiting faults end when the
client disconnects (handler cancellation is on) or when the server closes.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from .recording import RecordedRequest
from .wire import JSON_TYPE, dumps

Proceed = Callable[[], Awaitable[web.StreamResponse]]


class Fault(Protocol):
    """Something that answers a request instead of (or before) the server."""

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse: ...


FaultRule = Callable[[RecordedRequest], "Fault | None"]


async def _forever() -> None:
    """Wait until cancelled (client gone, or server closing)."""
    await asyncio.Event().wait()


@dataclass(frozen=True)
class Respond:
    """Answer with this status and body; dicts and lists are sent as JSON."""

    status: int
    body: str | bytes | dict[str, Any] | list[Any] = b""
    content_type: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        body, content_type = self._encoded()
        return web.Response(status=self.status, body=body, content_type=content_type, headers=self.headers)

    def _encoded(self) -> tuple[bytes, str | None]:
        if isinstance(self.body, dict | list):
            return dumps(self.body), self.content_type or JSON_TYPE
        if isinstance(self.body, str):
            return self.body.encode("utf-8"), self.content_type or "text/plain"
        return self.body, self.content_type


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds``, then answer normally (for client timeouts, not for synchronisation)."""

    seconds: float

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        await asyncio.sleep(self.seconds)
        return await proceed()


@dataclass(frozen=True)
class Hang:
    """Never answer: the request stays in flight until the client disconnects."""

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        await _forever()
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class StallBody:
    """Send the status line and headers (and ``partial`` bytes), then stall the rest of the body."""

    status: int = 200
    partial: bytes = b""
    content_type: str = JSON_TYPE

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        response = web.StreamResponse(status=self.status)
        response.content_type = self.content_type
        await response.prepare(request)
        if self.partial:
            await response.write(self.partial)
        await _forever()
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class SizedBody:
    """A 200 JSON body of exactly ``size`` bytes (a JSON string), for answer-size caps.

    ``chunked`` streams it without Content-Length, so the client cannot reject it up front.
    """

    size: int
    chunked: bool = False
    status: int = 200

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        body = b'"' + b"a" * max(self.size - 2, 0) + b'"' if self.size >= 2 else b"0" * self.size
        response = web.StreamResponse(status=self.status)
        response.content_type = JSON_TYPE
        if self.chunked:
            response.enable_chunked_encoding()
        else:
            response.content_length = len(body)
        await response.prepare(request)
        for start in range(0, len(body), 65536):
            await response.write(body[start : start + 65536])
        await response.write_eof()
        return response


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without sending anything."""

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.close()
        await _forever()  # connection_lost cancels this handler
        raise AssertionError("unreachable")


class CloseKeptAlive:
    """Close a kept-alive connection, without answering, as the next request of ``methods`` arrives on
    it: what a server does whose keep-alive timeout ran out just as the client reused the connection.
    Use it for every request (``set_fault(fault)``), so that it sees each connection's first request.
    Connections are told apart by their transport object (held weakly: an id could be reused)."""

    def __init__(self, methods: Collection[str] = ("POST",)) -> None:
        self._methods = frozenset(methods)
        self._seen: weakref.WeakSet[asyncio.BaseTransport] = weakref.WeakSet()
        self.closed = 0

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        transport = request.transport
        if transport is None:
            return await proceed()
        if request.method in self._methods and transport in self._seen:
            self._seen.discard(transport)
            self.closed += 1
            transport.close()
            await _forever()
        self._seen.add(transport)
        return await proceed()


@dataclass(frozen=True)
class InvalidJson:
    """A 200 answer that claims to be JSON but is cut off mid-value."""

    status: int = 200
    body: bytes = b'{"results": [{"index": 0, "relevance_score": 0.5'

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        return web.Response(status=self.status, body=self.body, content_type=JSON_TYPE)


@dataclass(frozen=True)
class Redirect:
    """Redirect to ``location`` (absolute URL or path)."""

    location: str
    status: int = 307

    async def apply(self, request: web.Request, proceed: Proceed) -> web.StreamResponse:
        return web.Response(status=self.status, headers={"Location": self.location})


def as_rule(fault: Fault | FaultRule | None) -> FaultRule | None:
    """Accept a rule, a single fault for every request, or None (no faults)."""
    if fault is None or not hasattr(fault, "apply"):
        return fault  # type: ignore[return-value]
    return lambda _request: fault  # type: ignore[return-value]
