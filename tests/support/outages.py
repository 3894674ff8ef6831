"""The unavailable servers several test files need: an overloaded answer, a port nobody listens on,
and settings that keep the breaker shut where a test is about something else."""

from __future__ import annotations

import socket
from typing import Any, Final

from .ports import fresh_port, fresh_socket
from .servers import Respond

# vLLM's (OpenAI-style) error body for a 503 (vLLM's ``ErrorResponse``)
OVERLOADED: Final = Respond(503, {"error": {"message": "The server is overloaded", "type": "ServiceUnavailableError",
                                            "param": None, "code": 503}})

SHUT_BREAKER: Final[dict[str, Any]] = {"breaker_failures": 1000, "breaker_failure_rate": 1}


def closed_port() -> int:
    """A port nothing listens on (handed out once, then released): connecting is refused."""
    return fresh_port()


_RESERVED: list[socket.socket] = []  # bound for the whole session, never listening


def closed_port_url() -> str:
    """The URL of a port nothing listens on, kept that way for the session (bound, never listening: a
    connection is refused), so that no later test's server gets the port and with it the open breaker
    the engine keeps for that URL."""
    sock = fresh_socket()
    _RESERVED.append(sock)
    return f"http://127.0.0.1:{sock.getsockname()[1]}"
