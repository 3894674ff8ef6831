"""What every dialect shares: the request and answer records, and strict reading of answers.

A dialect builds a ``WireRequest`` for a ``ScoreBatch`` and turns a ``WireAnswer`` into one score per
pair. It does no I/O, so it is tested with plain data. Anything that is not what the protocol promises
raises ``MalformedAnswer``; a non-success status raises ``ServerError`` carrying the server's own text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..answer_boundary import read_json
from ..errors import MalformedAnswer
from ..redaction import shown_value
from ..scores import ScoreScale
from .error_bodies import raise_for_status


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


class Dialect(Protocol):
    """A wire dialect: how one family of servers wants pairs sent and how it answers."""

    @property
    def name(self) -> str: ...

    @property
    def api(self) -> str:
        """``rerank`` or ``qwen3_score``: the rerank_api setting this dialect serves."""
        ...

    @property
    def path(self) -> str: ...

    @property
    def mixes_queries(self) -> bool:
        """True when one request may carry pairs of different queries."""
        ...

    @property
    def max_pairs(self) -> int:
        """The server's own per-request limit."""
        ...

    @property
    def score_scale(self) -> ScoreScale:
        """What the server's scores are: probabilities, logits, or the model's raw output (see core.scores)."""
        ...

    @property
    def instruction(self) -> str:
        """The instruction this dialect sends or renders ("" when none): requests with another one differ."""
        ...

    def with_instruction(self, instruction: str) -> Dialect:
        """This dialect carrying ``instruction`` where it sends or renders one; itself otherwise."""
        ...

    def build(self, batch: ScoreBatch, model: str) -> WireRequest: ...

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]: ...


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


def _describe_body(answer: WireAnswer) -> str:
    kind = answer.content_type or "no content type"
    if not answer.body:
        return f"empty body, {kind}"
    return f"{len(answer.body)} bytes of {kind}"
