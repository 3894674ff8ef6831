"""Request validation that reports errors the way FastAPI + pydantic v2 do.

Infinity sends these as 422 ``{"detail": [...]}``; vLLM folds them into a 400 message. Only the
checks these servers' request models need are here; messages are pydantic v2's wording.
"""

from __future__ import annotations

import json
from typing import Any

from .wire import is_int

Loc = tuple[str | int, ...]
ErrorDict = dict[str, Any]
Rejected = Any  # always None: the value a failed field check yields


def error(kind: str, loc: Loc, msg: str, value: Any, ctx: dict[str, Any] | None = None) -> ErrorDict:
    """One pydantic error entry, in FastAPI's key order."""
    entry: ErrorDict = {"type": kind, "loc": list(loc), "msg": msg, "input": value}
    if ctx is not None:
        entry["ctx"] = ctx
    return entry


def body_errors(text: str, value: Any, syntax: json.JSONDecodeError | None) -> list[ErrorDict]:
    """Errors that stop validation before any field: no body, bad JSON, not an object."""
    if not text.strip():
        return [error("missing", ("body",), "Field required", None)]
    if syntax is not None:
        return [error("json_invalid", ("body", syntax.pos), "JSON decode error", {}, {"error": syntax.msg})]
    if not isinstance(value, dict):
        msg = "Input should be a valid dictionary or object to extract fields from"
        return [error("model_attributes_type", ("body",), msg, value)]
    return []


class BodyCheck:
    """Validate the fields of one JSON object body, collecting every error like pydantic does."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.errors: list[ErrorDict] = []

    def string(self, name: str, *, required: bool = True, strip: bool = False,
               max_length: int | None = None, default: str | None = None) -> str | None:
        value = self.body.get(name, default)
        if name not in self.body:
            return self._missing(name) if required else default
        if not isinstance(value, str):
            return self._add("string_type", (name,), "Input should be a valid string", value)
        value = value.strip() if strip else value
        if max_length is not None and len(value) > max_length:
            msg = f"String should have at most {max_length} characters"
            return self._add("string_too_long", (name,), msg, value, {"max_length": max_length})
        return value

    def string_list(self, name: str, *, strip: bool = False, min_items: int | None = None,
                    max_items: int | None = None) -> list[str] | None:
        if name not in self.body:
            return self._missing(name)
        value = self.body[name]
        if not isinstance(value, list):
            return self._add("list_type", (name,), "Input should be a valid list", value)
        bad = [i for i, item in enumerate(value) if not isinstance(item, str)]
        for i in bad:
            self._add("string_type", (name, i), "Input should be a valid string", value[i])
        if bad:
            return None
        items = [item.strip() for item in value] if strip else list(value)
        return self._check_length(name, items, min_items, max_items)

    def integer(self, name: str, *, gt: int | None = None, ge: int | None = None) -> int | None:
        value = self.body.get(name)
        if value is None:
            return None
        if not is_int(value):
            return self._add("int_type", (name,), "Input should be a valid integer", value)
        if gt is not None and value <= gt:
            return self._add("greater_than", (name,), f"Input should be greater than {gt}", value, {"gt": gt})
        if ge is not None and value < ge:
            msg = f"Input should be greater than or equal to {ge}"
            return self._add("greater_than_equal", (name,), msg, value, {"ge": ge})
        return value

    def boolean(self, name: str, default: bool = False) -> bool:
        value = self.body.get(name, default)
        if not isinstance(value, bool):
            self._add("bool_type", (name,), "Input should be a valid boolean", value)
            return default
        return value

    def _check_length(self, name: str, items: list[str], low: int | None, high: int | None) -> list[str] | None:
        count = len(items)
        if low is not None and count < low:
            msg = f"List should have at least {low} item{_s(low)} after validation, not {count}"
            ctx = {"field_type": "List", "min_length": low, "actual_length": count}
            return self._add("too_short", (name,), msg, items, ctx)
        if high is not None and count > high:
            msg = f"List should have at most {high} item{_s(high)} after validation, not {count}"
            ctx = {"field_type": "List", "max_length": high, "actual_length": count}
            return self._add("too_long", (name,), msg, items, ctx)
        return items

    def _missing(self, name: str) -> Rejected:
        return self._add("missing", (name,), "Field required", self.body)

    def _add(self, kind: str, loc: Loc, msg: str, value: Any, ctx: dict[str, Any] | None = None) -> Rejected:
        """Record an error; returns None so a check can ``return self._add(...)``."""
        self.errors.append(error(kind, ("body", *loc), msg, value, ctx))
        return None


def _s(count: int) -> str:
    return "" if count == 1 else "s"
