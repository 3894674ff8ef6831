"""The hostile servers of issue 15: real loopback servers with a fault that answers in a way built to
break a reader. Each was found to raise an internal error (and log a traceback) before: a score that is
an integer too large for a float, a FastAPI ``detail`` whose ``loc`` is a number, JSON nested 100,000
levels deep, a ``/models`` listing with an entry that is no object or ``capabilities`` that are a number.

``HOSTILE_SERVERS`` maps a name to the server kind and the rule that makes it hostile; the service
tests and the CLI tests (``a0-reranker probe``) both use them.

Issue 21 adds answers that are not HTTP at all (``NOT_HTTP_ANSWERS``, sent by ``RawAnswer`` in place
of the server's answer) and ``other_service``: a loopback port that runs another service (SSH, Redis).
"""

from __future__ import annotations

import asyncio
import json
import socketserver
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web
from reliability.answer_faults import MUTATIONS, DamagedAnswer

from support.ports import listen_on_fresh_port
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


# --- answers that are not HTTP (issue 21) ---------------------------------------------------------------

SSH_BANNER: Final = b"SSH-2.0-OpenSSH_9.6\r\n"  # an SSH server greets every connection with it
REDIS_ERROR: Final = b"-ERR unknown command\r\n"  # what Redis answers a line it does not know


@dataclass(frozen=True)
class NotHttp:
    """Bytes sent back where an HTTP answer belongs; ``reason``: a part of aiohttp's reason for refusing
    them; ``plainly``: what the report says of them."""

    answer: bytes
    reason: str
    plainly: str


NOT_HTTP: Final = "does not speak HTTP"
INVALID_HTTP: Final = "is not valid HTTP"
NOT_HTTP_ANSWERS: Final[Mapping[str, NotHttp]] = {
    "ssh_banner": NotHttp(SSH_BANNER, "b'SSH-2.0-OpenSSH_9.6'", NOT_HTTP),
    "redis_error": NotHttp(REDIS_ERROR, "b'-ERR unknown command'", NOT_HTTP),
    "broken_status_line": NotHttp(b"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\n{}", "Invalid status code",
                                  INVALID_HTTP),
    "header_over_8_kib": NotHttp(b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 9000 +
                                 b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                                 "Got more than 8190 bytes", INVALID_HTTP),
    "broken_chunked_body": NotHttp(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                                   "Invalid character in chunk size", INVALID_HTTP),
    "broken_gzip_body": NotHttp(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                                b"Content-Length: 5\r\n\r\nhello", "Can not decode content-encoding: gzip",
                                INVALID_HTTP),
}


@dataclass(frozen=True)
class RawAnswer:
    """Send ``data`` back in place of an HTTP answer, then close the connection: what a client sees of a
    port given to another service, or of a broken proxy. The whole answer goes out in one write, so
    the client reads it at once (aiohttp refuses a broken chunk only when it comes with the headers)."""

    data: bytes

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.write(self.data)
            request.transport.close()
        await asyncio.Event().wait()  # connection_lost cancels this handler
        raise AssertionError("unreachable")


class OtherService(socketserver.ThreadingTCPServer):
    """A loopback port that runs another service: it sends ``greeting`` as a client connects (SSH's
    banner), answers whatever it is sent with ``reply`` once (Redis's error), and reads on until the
    client gives up and closes (closing first could reset the connection before the client read it)."""

    daemon_threads = True

    def __init__(self, greeting: bytes = b"", reply: bytes = b"") -> None:
        self.greeting = greeting
        self.reply = reply
        self.connections = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _OtherServiceConnection, bind_and_activate=False)
        listen_on_fresh_port(self)  # never a port an earlier server had

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _OtherServiceConnection(socketserver.BaseRequestHandler):
    server: OtherService

    def handle(self) -> None:
        with self.server.lock:
            self.server.connections += 1
        self.request.settimeout(30)
        try:
            self.request.sendall(self.server.greeting)
            replied = False
            while self.request.recv(65536):
                if self.server.reply and not replied:
                    self.request.sendall(self.server.reply)
                    replied = True
        except OSError:
            return


@contextmanager
def other_service(greeting: bytes = b"", reply: bytes = b"") -> Iterator[OtherService]:
    """An ``OtherService`` serving in a thread until the block ends."""
    server = OtherService(greeting, reply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _quoted(texts: Sequence[str], style: str) -> str:
    if style == "flattened":
        return "; ".join(" ".join(t.split()) for t in texts)
    if style == "repr":
        return "; ".join(repr(t) for t in texts)
    if style == "json":
        return json.dumps(list(texts))
    return "\n".join(texts)  # as received, newlines and runs of spaces included


@dataclass(frozen=True)
class EchoWhatItReceived:
    """A 400 whose message quotes the query and the documents exactly as they arrived (cut by our limits),
    written back in ``style``: as received, whitespace flattened, repr-quoted or as a JSON list."""

    style: str

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        body = await request.json()
        texts = [body.get("query") or body.get("text_1") or "", *(body.get("documents") or body.get("text_2") or [])]
        message = f"cannot score {len(texts)} inputs: {_quoted([str(t) for t in texts], self.style)}"
        return web.json_response({"error": {"message": message, "type": "BadRequestError", "code": 400}}, status=400)
