"""What every dialect shares: the dialect protocol and strict reading of answers.

A dialect builds a ``WireRequest`` for a ``ScoreBatch`` and turns a ``WireAnswer`` into one score per
pair. It does no I/O, so it is tested with plain data. Anything that is not what the protocol promises
raises ``MalformedAnswer``; a non-success status raises ``ServerError`` carrying the server's own text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import MalformedAnswer
from ..redaction import shown_value
from ..scores import ScoreScale
from .error_bodies import raise_for_status
from .wire import ScoreBatch, WireAnswer, WireRequest


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

