"""The JSON vLLM sends: errors in the new (nested) or old (flat) style, and 404/405 bodies."""

from __future__ import annotations

from typing import Literal

from aiohttp import web

from .wire import json_response

ErrorStyle = Literal["new", "old"]


def error(style: ErrorStyle, status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    """Since v0.10.1 ``{"error": {...}}``; before it a flat ``{"object": "error", ...}``."""
    if style == "new":
        return json_response({"error": {"message": message, "type": kind, "param": param, "code": status}},
                             status)
    return json_response({"object": "error", "message": message, "type": kind, "param": param,
                          "code": status}, status)


def route_miss(style: ErrorStyle, status: int) -> web.Response:
    """New builds pass Starlette's HTTPException through the error handler; old ones use FastAPI's."""
    phrase = "Not Found" if status == 404 else "Method Not Allowed"
    if style == "new":
        return json_response({"error": {"message": phrase, "type": phrase, "param": None, "code": status}},
                             status)
    return json_response({"detail": phrase}, status)


def unauthorized() -> web.Response:
    return json_response({"error": "Unauthorized"}, 401)
