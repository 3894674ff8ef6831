"""The records a dialect and the transport exchange: the pairs of one request, the request, the answer;
and the one translation boundary for what a server answered.

They sit below ``base`` (strict reading of answers, the servers' error words) and the transport.

Everything a server sends is foreign data. A parser or a judge that meets a shape it did not expect
may raise anything (TypeError, AttributeError, OverflowError, RecursionError ...); ``read_answer``
turns any such exception into ``MalformedAnswer``, so the service counts a malformed answer and
reports it to the breaker instead of logging a bug. ``read_json`` is the JSON reader for answers: it
refuses, while the standard library parses, integers longer than any number a reranker has reason to
send, and nesting deeper than the standard library can follow, so neither reaches a parser.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, ParamSpec, TypeVar

from ..errors import MalformedAnswer, RerankError

# The largest finite float has 309 digits: no score, index, count or id a server sends needs more.
MAX_INT_DIGITS: Final = 320

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
        except MalformedAnswer as exc:
            raise MalformedAnswer(f"{exc} ({_describe_body(self)})") from None


def _describe_body(answer: WireAnswer) -> str:
    """The body's size and type, never its content (it may quote our input)."""
    kind = answer.content_type or "no content type"
    if not answer.body:
        return f"empty body, {kind}"
    return f"{len(answer.body)} bytes of {kind}"


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
