"""How a server's failed answer becomes our error: its error body read into one short message, "input too
long" recognised, and a 429's Retry-After. The bodies read: Cohere's, OpenAI-style (Infinity, vLLM ≥ 0.10.1,
llama.cpp), TEI's, old vLLM's and FastAPI's JSON, plain text, HTML (named as such); with no words, the status's
hint. The message keeps the server's layout: masking must see a quote of our input before it is flattened."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Final

from ..errors import InputTooLong, RateLimited, ServerError, TooManyTexts
from ..redaction import clipped

if TYPE_CHECKING:
    from .wire import WireAnswer

MAX_RETRY_AFTER_S: Final = 3600.0
MAX_MESSAGE_CHARS: Final = 2000  # what is kept of the server's words, before masking shortens them for display

# vLLM "maximum context length"; llama.cpp "too large to process" (500) and "context size"; TEI "must have less
# than"; SGLang "The input (N tokens) is longer than the model's context length (M tokens)."
_TOO_LONG: Final = re.compile(
    r"maximum context length|too large to process|exceed_context_size|context size|must have less than"
    r"|longer than the model's context length"
    r"|too long|maximum sequence length|exceeds? the maximum|token limit|should have at most \d+ characters",
    re.IGNORECASE,
)

# TEI's error_type "Overloaded" (its message "Model is overloaded": every concurrent-request permit taken, read as
# "Model is overloaded (Overloaded)"); Infinity's "model <name> is currently overloaded" (its queue full)
_OVERLOADED: Final = re.compile(r"\(Overloaded\)\Z|is currently overloaded\Z")

# TEI: "batch size 40 > maximum allowed batch size 32"; FastAPI (Infinity): "List should have at most 8 items"
_TOO_MANY: Final = re.compile(r"(?:maximum allowed batch size|list should have at most) (\d+)", re.IGNORECASE)

_STATUS_HINTS: Final = {
    401: "unauthorized: check the API key", 402: "payment required: the account has no credit or quota left",
    403: "forbidden: check the API key and its permissions",
    404: "not found", 405: "method not allowed", 413: "request too large", 429: "rate limited or overloaded",
    498: "invalid API token", 501: "not supported by this server", 502: "bad gateway",
    503: "service unavailable", 504: "gateway timeout",
}


def server_error(answer: WireAnswer) -> ServerError:
    message = error_message(answer)
    if answer.status == 429:
        return RateLimited(429, message, parse_retry_after(answer.headers.get("retry-after"), time.time()),
                           overloaded=_OVERLOADED.search(message) is not None)
    if answer.status == 422 and (limit := _TOO_MANY.search(message)):
        return TooManyTexts(422, message, int(limit.group(1)))
    if answer.status == 413 or (answer.status in (400, 422, 500) and _TOO_LONG.search(message)):
        return InputTooLong(answer.status, message)
    return ServerError(answer.status, message)


def error_message(answer: WireAnswer) -> str:
    message = answer.body.decode("utf-8", errors="replace").strip()
    if message.startswith(("{", "[")):
        try:
            message = _message_from_json(answer.json())
        except Exception:  # a body we cannot read gives no words: the status's hint stands in
            message = ""
    elif "html" in answer.content_type.lower() or message.lower().startswith(("<!doctype", "<html")):
        message = "an HTML page instead of an API answer"
    return clipped((message or _STATUS_HINTS.get(answer.status, "no error details")).strip(), MAX_MESSAGE_CHARS)


def _message_from_json(data: Any) -> str:
    if not isinstance(data, dict):
        return ""
    error, detail = data.get("error"), data.get("detail")
    if isinstance(error, dict):
        return _text(error.get("message")) or _text(error.get("type"))
    if isinstance(error, str):
        kind = _text(data.get("error_type"))
        return f"{error} ({kind})" if kind else error
    if "message" in data:
        return _text(data.get("message"))
    if isinstance(detail, list):
        return "; ".join(_fastapi_problem(d) for d in detail[:3] if isinstance(d, dict))
    return detail if isinstance(detail, str) else ""


def _fastapi_problem(problem: dict[str, Any]) -> str:
    parts = problem.get("loc")
    parts = parts if isinstance(parts, list) else []
    location = ".".join(str(part) for part in parts if isinstance(part, str | int) and part != "body")
    message = _text(problem.get("msg"))
    return f"{location}: {message}" if location else message


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds to wait from ``now_epoch`` (wall-clock, as HTTP dates are) for delay-seconds or an HTTP-date
    (RFC 9110 §10.2.3): a past date means "now", an absurd delay is capped."""
    text = (value or "").strip()
    if not text:
        return None
    if text.isascii() and text.replace(".", "", 1).isdigit():
        return _bounded_wait(float(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime dates carry no zone; every HTTP date is GMT
        when = when.replace(tzinfo=UTC)
    return _bounded_wait(when.timestamp() - now_epoch)


def _bounded_wait(seconds: float) -> float | None:
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S) if math.isfinite(seconds) else None
