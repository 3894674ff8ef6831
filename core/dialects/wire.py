"""What every dialect shares: the records a dialect and the transport exchange (the pairs of one
request, the request, the answer), strict reading of answers, and the servers' error bodies and
Retry-After headers. A dialect does no I/O, so it is tested with plain data.

Everything a server sends is foreign data. Anything that is not what the protocol promises raises
``MalformedAnswer``: ``read_answer`` turns whatever a parser or a judge raises on a shape it did not
expect (TypeError, AttributeError, OverflowError, RecursionError ...) into it, so the service counts a
malformed answer and reports it to the breaker instead of logging a bug; ``read_json`` refuses, while
the standard library parses, integers longer than any number a reranker has reason to send, and
nesting deeper than the standard library can follow, so neither reaches a parser. A non-success status
raises ``ServerError`` carrying the server's own text.

``raise_for_status`` reads each server's error body into one short message, and recognises "input too
long". Shapes, as each server's source and error reference give them: Cohere ``{"message"}``;
OpenAI-style ``{"error": {"message", "type"}}`` (Infinity, vLLM ≥ 0.10.1, llama.cpp); TEI ``{"error":
"...", "error_type"}``; old vLLM ``{"object": "error", "message"}``; FastAPI ``{"detail": "..."}`` or
``{"detail": [{"loc", "msg"}]}``; vLLM auth ``{"error": "Unauthorized"}``; TEI's text/plain 422 and
empty 401/404 bodies; HTML pages from proxies. The message keeps the server's own layout and is only
bounded in length here: servers quote our input in it, and masking (``redaction.shown``) must see the
quote as written before the text is flattened. A body of any other shape gives no words, only the
status's hint; reading it never raises.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Final, ParamSpec, TypeVar

from ..errors import InputTooLong, MalformedAnswer, RateLimited, RerankError, ServerError
from ..redaction import ELLIPSES, shown_value

# The largest finite float has 309 digits: no score, index, count or id a server sends needs more.
MAX_INT_DIGITS: Final = 320
MAX_RETRY_AFTER_S: Final = 3600.0
MAX_MESSAGE_CHARS: Final = 2000  # what is kept of the server's words, before masking shortens them for display

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class ScoreBatch:
    """The pairs one HTTP request scores: distinct queries, and ``(query_index, document)`` pairs."""

    queries: tuple[str, ...]
    pairs: tuple[tuple[int, str], ...]

    @classmethod
    def single(cls, query: str, documents: Sequence[str]) -> ScoreBatch:
        return cls(queries=(query,), pairs=tuple((0, doc) for doc in documents))

    @property
    def documents(self) -> list[str]:
        return [doc for _, doc in self.pairs]

    def __len__(self) -> int:
        return len(self.pairs)


@dataclass(frozen=True)
class WireRequest:
    """One HTTP request, described as data: the transport sends it, nothing else does."""

    method: str
    path: str
    body: Any = None


@dataclass(frozen=True)
class WireAnswer:
    """What came back: status, content type and the raw body (already size-capped by the transport)."""

    status: int
    body: bytes = b""
    content_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        try:
            return read_json(self.body)
        except MalformedAnswer as exc:  # say the body's size and type, never its content (it may quote our input)
            kind = self.content_type or "no content type"
            described = f"{len(self.body)} bytes of {kind}" if self.body else f"empty body, {kind}"
            raise MalformedAnswer(f"{exc} ({described})") from None


def read_answer(read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``read(*args)``, with any exception but our own errors raised as ``MalformedAnswer``."""
    try:
        return read(*args, **kwargs)
    except RerankError:
        raise
    except Exception as exc:  # the answer is foreign data: whatever breaks while reading it is its fault
        raise MalformedAnswer(f"the answer could not be read ({type(exc).__name__})") from None


class _IntegerTooLong(ValueError):
    pass


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _IntegerTooLong
    return int(text)


def read_json(body: bytes) -> Any:
    """Decode a UTF-8 JSON body; anything else (or a number or nesting beyond reason) is ``MalformedAnswer``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedAnswer("the answer is not UTF-8 text") from None
    try:
        return json.loads(text, parse_int=_bounded_int)
    except _IntegerTooLong:
        raise MalformedAnswer(f"the answer holds an integer of more than {MAX_INT_DIGITS} digits") from None
    except RecursionError:
        raise MalformedAnswer("the answer is JSON nested too deeply to read") from None
    except ValueError:
        raise MalformedAnswer("the answer is not JSON") from None


def read_success_json(answer: WireAnswer) -> Any:
    """Raise for a failed status, then decode the JSON body."""
    raise_for_status(answer)
    return answer.json()


def scores_from_items(items: Any, expected: int, score_keys: Sequence[str]) -> list[float]:
    """Put ``[{index, <score>}]`` items back into input order, refusing anything ambiguous."""
    if not isinstance(items, list):
        raise MalformedAnswer(f"expected a list of results, got {type(items).__name__}")
    if len(items) != expected:
        raise MalformedAnswer(f"expected {expected} results, got {len(items)}")
    scores: list[float | None] = [None] * expected
    for item in items:
        if not isinstance(item, dict):
            raise MalformedAnswer("a result is not an object")
        index = item.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected:
            raise MalformedAnswer(f"result index {shown_value(index)} is out of range 0..{expected - 1}")
        if scores[index] is not None:
            raise MalformedAnswer(f"result index {index} appears twice")
        scores[index] = _score_of(item, score_keys)
    return [s for s in scores if s is not None]


def _score_of(item: dict[str, Any], score_keys: Sequence[str]) -> float:
    for key in score_keys:
        if key in item:
            value = item[key]
            number = _as_float(value)
            if not math.isfinite(number):
                raise MalformedAnswer(f"score {shown_value(value)} is not a finite number")
            return number
    raise MalformedAnswer(f"a result has no {' or '.join(score_keys)}")


def _as_float(value: Any) -> float:
    """A JSON number as a float; NaN for anything else, and for an int no float holds (``10**400``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.nan


# --- the servers' error bodies -------------------------------------------------------------------

_TOO_LONG: Final = re.compile(
    r"maximum context length|too large to process|exceed_context_size|context size|must have less than"
    r"|too long|maximum sequence length|exceeds? the maximum|token limit|should have at most",
    re.IGNORECASE,
)

_STATUS_HINTS: Final = {
    401: "unauthorized: check the API key",
    403: "forbidden: check the API key and its permissions",
    404: "not found",
    405: "method not allowed",
    413: "request too large",
    429: "rate limited or overloaded",
    498: "invalid API token",
    501: "not supported by this server",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
}


def raise_for_status(answer: WireAnswer) -> None:
    """Raise ``ServerError`` (``RateLimited`` with its Retry-After, ``InputTooLong``) unless 2xx."""
    if 200 <= answer.status < 300:
        return
    message = error_message(answer)
    if answer.status == 429:
        raise RateLimited(429, message, parse_retry_after(answer.headers.get("retry-after"), time.time()))
    if answer.status == 413 or (answer.status in (400, 422, 500) and _TOO_LONG.search(message)):
        raise InputTooLong(answer.status, message)
    raise ServerError(answer.status, message)


def error_message(answer: WireAnswer) -> str:
    """The server's own words for a failed request, or a plain hint when it gave none."""
    try:
        message = read_answer(_server_words, answer)
    except MalformedAnswer:
        message = ""
    return _bounded(message or _STATUS_HINTS.get(answer.status, "no error details"))


def _server_words(answer: WireAnswer) -> str:
    text = answer.body.decode("utf-8", errors="replace").strip()
    if text.startswith(("{", "[")):
        return _message_from_json(read_json(answer.body))
    if "html" in answer.content_type.lower() or text.lower().startswith(("<!doctype", "<html")):
        return "an HTML page instead of an API answer"
    return text


def _message_from_json(data: Any) -> str:
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            return _text(error.get("message")) or _text(error.get("type"))
        if isinstance(error, str):
            kind = _text(data.get("error_type"))
            return f"{error} ({kind})" if kind else error
        if "message" in data:
            return _text(data.get("message"))
        detail = data.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list):
            return "; ".join(_fastapi_problem(d) for d in detail[:3] if isinstance(d, dict))
    return ""


def _fastapi_problem(problem: dict[str, Any]) -> str:
    parts = problem.get("loc")
    parts = parts if isinstance(parts, list) else []
    location = ".".join(str(part) for part in parts if isinstance(part, str | int) and part != "body")
    message = _text(problem.get("msg"))
    return f"{location}: {message}" if location else message


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _bounded(message: str) -> str:
    text = message.strip()
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + ELLIPSES[0]


# --- Retry-After ---------------------------------------------------------------------------------


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds to wait from ``now_epoch`` (wall-clock seconds, as HTTP dates are), or None. A 429's
    ``Retry-After`` holds delay-seconds or an HTTP-date (RFC 9110 §10.2.3): a date in the past means
    "now", an absurd delay is capped, and text we cannot read counts as no header at all."""
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
