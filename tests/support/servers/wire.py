"""HTTP building blocks the protocol modules share: compact JSON answers, body parsing, tokens."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

JSON_TYPE = "application/json"


def dumps(value: Any) -> bytes:
    """Compact JSON, as FastAPI, axum and llama.cpp all write it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def json_response(value: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON answer with ``Content-Type: application/json`` (no charset, like the real servers)."""
    return web.Response(status=status, body=dumps(value), content_type=JSON_TYPE, headers=headers)


def empty_response(status: int, headers: Mapping[str, str] | None = None) -> web.Response:
    """A bodiless answer (TEI's 401/404, vLLM's /health)."""
    return web.Response(status=status, headers=headers)


@dataclass(frozen=True)
class ParsedJson:
    """A request body parsed as JSON; ``error`` is set when it was not valid JSON."""

    value: Any = None
    error: json.JSONDecodeError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_json(text: str) -> ParsedJson:
    """Parse without raising, so each server can word its own syntax error."""
    try:
        return ParsedJson(value=json.loads(text))
    except json.JSONDecodeError as exc:
        return ParsedJson(error=exc)


async def body_text(request: web.Request) -> str:
    """The raw body as text; aiohttp caches it, so the recorder and the handler both read it."""
    return (await request.read()).decode("utf-8", "replace")


def bearer_token(request: web.Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def key_accepted(request: web.Request, api_key: str | None) -> bool:
    """True when no key is configured or the request carries exactly that key."""
    return api_key is None or bearer_token(request) == api_key


def hex_id(prefix: str, length: int = 16) -> str:
    """``prefix`` + random hex, like vLLM's ``score-bb63aa17c7120fa1``."""
    return prefix + secrets.token_hex(length // 2)


def uuid_id(prefix: str = "") -> str:
    """``prefix`` + a uuid4, like Infinity's ``infinity-<uuid4>`` or Cohere's bare uuid."""
    return prefix + str(uuid.uuid4())


def unix_now() -> int:
    """Whole seconds since the epoch, for ``created`` fields."""
    return int(time.time())


def is_str_list(value: Any) -> bool:
    """A JSON list whose items are all strings."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def is_int(value: Any) -> bool:
    """A JSON integer (JSON booleans are not integers here)."""
    return isinstance(value, int) and not isinstance(value, bool)
