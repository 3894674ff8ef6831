"""Scores, the rankings made of them and what a recall returns. One relevance scale for every server,
probabilities in [0, 1], so one ``rerank_min_score`` means the same on each (docs/servers.md, "Scores on one
scale")."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

ScoreScale = Literal["probability", "logit", "raw"]
PROBABILITY: Final = "probability"  # the server's scores are already in [0, 1]
LOGIT: Final = "logit"  # unbounded logits: a sigmoid maps them to [0, 1]
RAW: Final = "raw"  # the model's own output, either of the two; the probe tells which
LONE_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")  # half a UTF-16 pair: text no server can encode
LOWEST: Final = -math.inf  # a blank document's score, never sent (``sent_ranking``); 0 on the 0-1 scale
Ranking = list[tuple[int, float]]
D = TypeVar("D")


def settled(declared: ScoreScale, probe_scores: Sequence[float] | None) -> ScoreScale:
    """What the dialect declares, or for ``raw`` what the probe's scores show (``raw`` when none answered), once
    per route: a batch of logits that happens to lie inside [0, 1] would otherwise be read as probabilities."""
    if declared != RAW or not probe_scores:
        return declared
    return PROBABILITY if _all_in_unit_range(probe_scores) else LOGIT


def normalize(scores: Sequence[float], scale: ScoreScale) -> list[float]:
    """``scores`` on the probability scale. ``raw`` (scale unknown) decides for this batch alone."""
    if scale == LOGIT or (scale == RAW and not _all_in_unit_range(scores)):
        return [sigmoid(s) for s in scores]
    return [min(1.0, max(0.0, s)) for s in scores]


def on_probability_scale(ranking: Sequence[tuple[int, float]], scale: ScoreScale) -> list[tuple[int, float]]:
    """A best-first ranking with its scores on the probability scale (monotonic: same order)."""
    probabilities = normalize([score for _, score in ranking], scale)
    return [(index, probability) for (index, _), probability in zip(ranking, probabilities, strict=True)]


def shared_scale(scales: Sequence[ScoreScale]) -> ScoreScale | None:
    """The one scale of several replicas' routes, or None when they differ (TEI's probabilities beside
    llama.cpp's logits): then each replica's scores go on the probability scale before they meet."""
    return scales[0] if scales and all(s == scales[0] for s in scales) else None


def sigmoid(x: float) -> float:
    """1 / (1 + e^-x) without overflow."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _all_in_unit_range(scores: Sequence[float]) -> bool:
    return all(0.0 <= s <= 1.0 for s in scores if s != LOWEST)


@dataclass(frozen=True)
class RerankResult:
    """The engine's one result, batcher to caller: the ranking, or None with the fallback reason and message."""

    ranking: Ranking | None
    api: str = ""
    reason: str = ""
    message: str = ""
    retries: int = 0  # requests sent again before the ranking came
    scale: ScoreScale = PROBABILITY  # what the ranking's scores are (``normalize`` puts them on one scale)
    failover_to: str = ""  # the replica that answered, when a request had to go on to another one
    answered_by: str = ""  # the replica whose answer it is


def ranked(scores: Sequence[float]) -> Ranking:
    """``(original_index, score)`` best-first; ties keep their original order."""
    return sorted(enumerate(scores), key=lambda item: (-item[1], item[0]))


def cut_head(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters (A0 puts the user's message at the query's head), lone surrogates as �."""
    return LONE_SURROGATE.sub("\ufffd", text[:max_chars])  # with nothing to change, ``text`` itself: no copy


def sent_ranking(result: RerankResult, sent: Sequence[int], total: int) -> RerankResult:
    """``result`` of the documents ``sent`` (their indices among ``total``) as a ranking of all: those not sent
    (blank) last, in their order, at the ``LOWEST`` score."""
    if result.ranking is None:
        return result
    blanks = sorted(set(range(total)).difference(sent))
    return dataclasses.replace(result, ranking=[*((sent[i], score) for i, score in result.ranking),
                                                *((i, LOWEST) for i in blanks)])


def tighter_limits(max_query_chars: int, max_doc_chars: int) -> tuple[int, int]:
    """The cuts of the one retry after "input too long": they fit a 512-token cross-encoder with room to spare."""
    return min(max_query_chars, 500), min(max_doc_chars, 1200)


@dataclass(frozen=True)
class OrderChange:
    """How reranking changed the top of a recall (shadow mode reports it)."""

    limit: int
    kept: int  # memories in both the stock and the reranked top-``limit``
    mean_displacement: float  # mean |stock position - reranked position| over the reranked top-``limit``

    @property
    def replaced(self) -> int:
        return self.limit - self.kept


def order_change(reranked_indices: Sequence[int], limit: int) -> OrderChange:
    """Compare the reranked order (indices into the stock order) with the stock order."""
    top = list(reranked_indices[:limit])
    kept = sum(1 for index in top if index < limit)
    displacement = sum(abs(index - position) for position, index in enumerate(top)) / max(len(top), 1)
    return OrderChange(limit=len(top), kept=kept, mean_displacement=displacement)


def page_content(document: Any) -> str:
    """The text A0 stores in a memory ``Document``."""
    return str(getattr(document, "page_content", document))  # a str is returned as it is, not copied


@dataclass(frozen=True)
class RecallOutcome(Generic[D]):
    """The documents a recall returns and what happened on the way."""

    documents: list[D]
    applied: bool  # the reranked order was returned
    scored: bool  # the reranker answered (also in shadow mode)
    candidates: int
    elapsed_s: float
    api: str = ""
    change: OrderChange | None = None
    ranking: Ranking | None = None  # the server's own scores, best first
    reason: str = ""  # why the stock order was kept, when the reranker did not answer
    message: str = ""
    retries: int = 0  # requests sent again before the reranker answered
    failover_to: str = ""  # the replica that answered, when a request had to go on to another one
    relevance: list[float] | None = None  # the ranking's scores on the one 0-1 scale, in ranking order
    rescued: int = 0  # returned documents from outside the stock top ``limit``
    floor_dropped: int = 0  # documents of the best ``limit`` left out because they scored below the floor


def choose(scored: RecallOutcome[D], pool: Sequence[D], limit: int, floor: float) -> RecallOutcome[D]:
    """The reranker's best ``limit`` of the pool, without those whose relevance is below ``floor``."""
    order = [index for index, _ in scored.ranking or []]
    kept = [index for index, value in zip(order, scored.relevance or [], strict=True) if value >= floor][:limit]
    return dataclasses.replace(scored, documents=[pool[index] for index in kept], applied=True,
                               rescued=sum(1 for index in kept if index >= limit),
                               floor_dropped=len(scored.documents) - len(kept))
