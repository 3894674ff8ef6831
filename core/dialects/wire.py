"""What every dialect shares, and the ``/rerank`` family most servers speak (one query, a list of documents,
scored indices back). A dialect does no I/O; a warm recall needs this module alone to build its body and read
the answer. Whatever a server sends that the protocol does not promise raises ``MalformedAnswer``, so the
service counts it and tells the breaker instead of logging a bug; a failed status raises ``ServerError``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, ParamSpec, TypeVar

from ..errors import MalformedAnswer, RerankError
from ..redaction import shown_value
from ..scores import PROBABILITY, ScoreScale
from .server_errors import server_error

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


def token_parts(batch: ScoreBatch, budget: int | None) -> list[ScoreBatch]:
    """``batch`` in runs of pairs whose query and document tokens, summed over the pairs, stay within ``budget`` (a
    server's per-request cap, counted so: Voyage's). Tokens are over-estimated as half the UTF-8 bytes, about twice
    an English text's and more than a CJK one's; a pair over the budget alone still goes, alone."""
    if budget is None:
        return [batch]
    parts: list[ScoreBatch] = []
    run: list[tuple[int, str]] = []
    used = 0
    for pair in batch.pairs:
        tokens = _tokens_at_most(batch.queries[pair[0]]) + _tokens_at_most(pair[1])
        if run and used + tokens > budget:
            parts.append(ScoreBatch(batch.queries, tuple(run)))
            run, used = [], 0
        run.append(pair)
        used += tokens
    return [*parts, ScoreBatch(batch.queries, tuple(run))] if run else parts or [batch]


def _tokens_at_most(text: str) -> int:
    return (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))) // 2 + 1


@dataclass(frozen=True)
class WireRequest:
    """One HTTP request as data: the transport sends it, nothing else does."""

    method: str
    path: str
    body: Any = None


@dataclass(frozen=True)
class WireAnswer:
    """What came back; the body is already size-capped by the transport."""

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


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise MalformedAnswer(f"the answer holds an integer of more than {MAX_INT_DIGITS} digits")
    return int(text)


def read_json(body: bytes) -> Any:
    """A UTF-8 JSON body; anything else (or a number or nesting beyond reason) is ``MalformedAnswer``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedAnswer("the answer is not UTF-8 text") from None
    try:
        return json.loads(text, parse_int=_bounded_int)
    except RecursionError:
        raise MalformedAnswer("the answer is JSON nested too deeply to read") from None
    except ValueError:
        raise MalformedAnswer("the answer is not JSON") from None


def read_success_json(answer: WireAnswer) -> Any:
    if not 200 <= answer.status < 300:
        raise server_error(answer)
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
    for key in score_keys:  # a loop, not a generator: this runs for every pair of every recall
        if key in item:
            value = item[key]
            break
    else:
        raise MalformedAnswer(f"a result has no {' or '.join(score_keys)}")
    try:  # a JSON number; not a bool, and not an int no float holds (10**400)
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    except OverflowError:
        number = math.nan
    if not math.isfinite(number):
        raise MalformedAnswer(f"score {shown_value(value)} is not a finite number")
    return number


@dataclass(frozen=True)
class RerankDialect:
    """One member of the family: its route, its fields and where its answer holds the results. Every dialect
    (``catalog.Dialect``) has the fields from ``name`` to ``instruction``, ``with_instruction``, ``build`` and
    ``parse``."""

    name: str
    path: str
    documents_key: str = "documents"
    extra: Mapping[str, Any] = field(default_factory=dict)
    max_pairs: int = 1000  # the server's own per-request limit
    requires_model: bool = False
    api: str = "rerank"  # or ``qwen3_score``: the rerank_api setting this dialect serves
    mixes_queries: bool = False  # True when one request may carry pairs of different queries
    score_scale: ScoreScale = PROBABILITY  # probabilities, logits, or the model's raw output (core.scores)
    takes_instruction: bool = False  # the server hands ``instruction`` to its score template (vLLM)
    instruction: str = ""  # sent as ``instruction`` when set; requests with another differ
    takes_model: bool = True  # TEI has no ``model`` field
    max_request_tokens: int | None = None  # a cap on the tokens of all pairs of a request (``token_parts``)
    results_keys: tuple[str, ...] = ("results", "data")  # where an object answer holds its list; () for a bare list
    score_keys: tuple[str, ...] = ("relevance_score", "score")

    def with_instruction(self, instruction: str) -> RerankDialect:
        return dataclasses.replace(self, instruction=instruction) if self.takes_instruction else self

    def build(self, batch: ScoreBatch, model: str) -> WireRequest:
        if len(batch.queries) != 1:
            raise ValueError(f"{self.name} scores one query per request, got {len(batch.queries)}")
        body: dict[str, Any] = {"model": model} if model and self.takes_model else {}
        body |= {"query": batch.queries[0], self.documents_key: batch.documents}
        if self.instruction:
            body["instruction"] = self.instruction
        return WireRequest("POST", self.path, body | dict(self.extra))

    def parse(self, answer: WireAnswer, batch: ScoreBatch) -> list[float]:
        """The results under one of ``results_keys`` (Cohere's ``results``, Voyage's ``data``), or the answer itself
        (SGLang; TEI, whose answer must be a list): ``scores_from_items`` refuses anything but a list."""
        data, keys = read_success_json(answer), self.results_keys
        if isinstance(data, dict) and keys:
            found = next((key for key in keys if key in data), None)
            if found is None:
                raise MalformedAnswer(f"the answer has neither {' nor '.join(map(repr, keys))}")
            data = data[found]
        elif not isinstance(data, list) and keys:
            raise MalformedAnswer(f"unexpected answer of type {type(data).__name__}")
        return scores_from_items(data, len(batch), self.score_keys)
