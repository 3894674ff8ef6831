"""The records a dialect and the transport exchange: the pairs of one request, the request, the answer.

They sit below both ``base`` (strict reading of answers) and ``error_bodies`` (the server's own error
words), so either may name them without importing the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..answer_boundary import read_json
from ..errors import MalformedAnswer


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
