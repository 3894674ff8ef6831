"""Hypothesis strategies for what a reranker server may answer, and the fault that answers it.

An ``AnswerPlan`` gives every distinct document a score, optionally damages the list of results in
one way, and picks a status. ``PlannedAnswer`` builds the body in the server's dialect from the
documents the request actually carries (so it needs no assumption about their order), and the plan
knows whether a correct client may use it (``usable``) and, if so, the ranking it implies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web
from hypothesis import strategies as st
from reliability.answer_faults import encode

from support.servers import SUFFIX

# How each kind wraps its results: the container and the score's name (each API's reference).
SHAPES: Final[Mapping[str, tuple[str, str]]] = {
    "infinity": ("results", "relevance_score"),
    "voyage": ("data", "relevance_score"),
    "mixedbread": ("data", "score"),
    "tei": ("bare", "score"),
    "sglang": ("bare", "score"),
    "vllm_qwen3": ("data", "score"),
}

Damage = Callable[[list[dict[str, Any]], int], list[Any]]


def _drop_last(items: list[dict[str, Any]], _n: int) -> list[Any]:
    return items[:-1]


def _duplicate_first(items: list[dict[str, Any]], _n: int) -> list[Any]:
    if len(items) == 1:
        return [*items, dict(items[0])]
    return [*items[:-1], {**items[-1], "index": items[0]["index"]}]


def _index_past_end(items: list[dict[str, Any]], n: int) -> list[Any]:
    return [{**items[0], "index": n}, *items[1:]]


def _extra_result(items: list[dict[str, Any]], n: int) -> list[Any]:
    return [*items, {**items[0], "index": n}]


def _score_of_first(value: Any) -> Damage:
    def damage(items: list[dict[str, Any]], _n: int) -> list[Any]:
        first = dict(items[0])
        for key in ("relevance_score", "score"):
            if key in first:
                first[key] = value
        return [first, *items[1:]]

    return damage


def _nothing(_items: list[dict[str, Any]], _n: int) -> list[Any]:
    return []


DAMAGES: Final[Mapping[str, Damage]] = {
    "drop_last": _drop_last,
    "duplicate_index": _duplicate_first,
    "index_past_end": _index_past_end,
    "extra_result": _extra_result,
    "nan_score": _score_of_first(math.nan),
    "infinite_score": _score_of_first(math.inf),
    "text_score": _score_of_first("0.5"),
    "null_score": _score_of_first(None),
    "no_results": _nothing,
}


@dataclass(frozen=True)
class AnswerPlan:
    """Scores by document text, an optional damage, the status, and harmless extra fields."""

    scores: Mapping[str, float]
    damage: str | None = None
    status: int = 200
    extras: Mapping[str, Any] = field(default_factory=dict)
    shuffle_seed: int = 0

    @property
    def usable(self) -> bool:
        return self.status == 200 and self.damage is None

    def expected_order(self, texts: Sequence[str]) -> list[int]:
        """Pool positions best first, as the client must rank a usable answer (ties keep pool order); a blank text
        is never sent and ranks last."""
        blank = [not text.strip() for text in texts]
        return sorted(range(len(texts)), key=lambda i: (blank[i], 0.0 if blank[i] else -self.scores[texts[i]], i))

    def body(self, documents: Sequence[str], kind: str) -> Any:
        container, score_name = SHAPES[kind]
        items: list[Any] = [{"index": j, score_name: self.scores[doc], **self.extras} for j, doc in enumerate(documents)]
        items.sort(key=lambda item: (hash((self.shuffle_seed, item["index"])), item["index"]))
        if self.damage is not None:
            items = DAMAGES[self.damage](items, len(documents))
        if self.status != 200:
            return {"error": {"message": "planned failure", "type": "BadRequestError", "code": self.status}}
        return items if container == "bare" else {container: items, "object": "list", "model": "m"}


def request_documents(body: Mapping[str, Any]) -> list[str]:
    """The documents a rerank request carries, as the caller wrote them (the judge template undone)."""
    for key in ("documents", "texts", "input"):
        if key in body:
            return list(body[key])
    prefix = "<Document>: "
    return [text[len(prefix) : len(text) - len(SUFFIX)] for text in body["text_2"]]


@dataclass(frozen=True)
class PlannedAnswer:
    """A fault that answers with ``plan`` in ``kind``'s dialect."""

    plan: AnswerPlan
    kind: str

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        body = self.plan.body(request_documents(await request.json()), self.kind)
        return web.Response(status=self.plan.status, body=encode(body), content_type="application/json")


# --- strategies ------------------------------------------------------------------------------------

document_texts = st.text(st.characters(codec="utf-8"), max_size=12)  # any unicode, empty included
finite_scores = st.floats(min_value=-50, max_value=50, allow_nan=False, allow_infinity=False)
extra_fields = st.dictionaries(st.sampled_from(["document", "meta", "text", "object", "id"]),
                               st.one_of(st.none(), st.text(max_size=5), st.integers(), st.booleans()),
                               max_size=2)


@st.composite
def answer_plans(draw: st.DrawFn, texts: Sequence[str]) -> AnswerPlan:
    """A plan for a pool of ``texts``: mostly usable answers, often damaged ones, sometimes errors."""
    distinct = list(dict.fromkeys(texts))
    scores = {text: draw(finite_scores) for text in distinct}
    damage = draw(st.one_of(st.none(), st.sampled_from(sorted(DAMAGES))))
    status = draw(st.sampled_from([200] * 8 + [400, 500, 503]))
    return AnswerPlan(scores=scores, damage=damage, status=status, extras=draw(extra_fields),
                      shuffle_seed=draw(st.integers(0, 1000)))


@st.composite
def pools(draw: st.DrawFn) -> list[str]:
    """Memory texts worth reranking (two or more): empty strings, unicode, the same text repeated."""
    unique = draw(st.lists(document_texts, min_size=1, max_size=10, unique=True))
    return draw(st.lists(st.sampled_from(unique), min_size=2, max_size=14))
