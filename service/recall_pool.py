"""What a reranked recall returns, given the candidate pool in stock order (no A0 knowledge here).

The memory wrapper hands over a pool larger than A0's answer: A0's own result first, then the memories
that a wider search found below A0's threshold. This module decides what to give back: the reranker's
best ``limit`` of the whole pool when reranking applies, without those it scores below
``rerank_min_score``; the stock top-``limit`` in shadow mode (with the order change recorded) and on
any failure, where the floor never applies. It never mutates the documents; it only picks among them.
It counts every pool it is given (size, whether it left anything to choose, memories rescued from
outside the stock result, memories the floor dropped). The demo and the CLI use this same function,
so they show what the plugin does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.scores import OrderChange, normalize, order_change
from . import runtime
from .reranker_service import RerankResult, stats_recorder

D = TypeVar("D")


def page_content(document: Any) -> str:
    """The text A0 stores in a memory ``Document``."""
    text = getattr(document, "page_content", document)
    return text if isinstance(text, str) else str(text)


@dataclass(frozen=True)
class RecallOutcome(Generic[D]):
    """The documents to return and what happened on the way (for the log line and the counters)."""

    documents: list[D]
    applied: bool  # the reranked order was returned
    scored: bool  # the reranker answered (also in shadow mode)
    candidates: int
    elapsed_s: float
    api: str = ""
    change: OrderChange | None = None
    ranking: list[tuple[int, float]] | None = None  # the server's own scores, best first
    reason: str = ""  # why the stock order was kept, when the reranker did not answer
    message: str = ""
    retries: int = 0  # requests sent again before the reranker answered
    failover_to: str = ""  # the replica that answered, when a request had to go on to another one
    relevance: list[float] | None = None  # the ranking's scores on the one 0-1 scale, in ranking order
    rescued: int = 0  # returned documents from outside the stock top ``limit``
    floor_dropped: int = 0  # documents of the best ``limit`` left out because they scored below the floor


async def rerank_pool(
    query: str,
    pool: Sequence[D],
    *,
    limit: int,
    config: RerankerConfig,
    text_of: Callable[[D], str] = page_content,
    deadline: float | None = None,
) -> RecallOutcome[D]:
    """Rerank ``pool`` (stock order, best first) for ``query`` and keep at most ``limit`` documents.

    Returns the stock top-``limit`` when the reranker is unavailable or in shadow mode. ``deadline``
    (monotonic; default ``rerank_timeout`` from now) lets a caller whose own work came first keep
    the whole of it within one timeout.
    """
    started = clock.now()
    stock = list(pool[:limit])
    if limit <= 0:
        return RecallOutcome(stock, applied=False, scored=False, candidates=len(pool), elapsed_s=0.0)
    if len(pool) < 2:
        return _counted(RecallOutcome(stock, applied=False, scored=False, candidates=len(pool), elapsed_s=0.0))
    result = await runtime.rerank_result_async(query, [text_of(d) for d in pool], config=config, deadline=deadline)
    elapsed = clock.now() - started
    ranking, api = result.ranking, result.api
    if ranking is None or len(ranking) != len(pool):
        return _counted(RecallOutcome(stock, applied=False, scored=False, candidates=len(pool), elapsed_s=elapsed,
                                      reason=result.reason or "error", message=result.message))
    order = [index for index, _ in ranking]
    change = order_change(order, len(stock))
    relevance = normalize([score for _, score in ranking], result.scale)
    scored = RecallOutcome(stock, applied=False, scored=True, candidates=len(pool), elapsed_s=elapsed,
                           api=api, change=change, ranking=ranking, relevance=relevance, retries=result.retries,
                           failover_to=result.failover_to)
    if not config.apply:
        stats_recorder().shadow(change.kept / change.limit if change.limit else 1.0, change.mean_displacement)
        return _counted(scored)
    return _counted(_choose(scored, pool, result, limit, config.min_score))


def _choose(scored: RecallOutcome[D], pool: Sequence[D], result: RerankResult, limit: int, floor: float
            ) -> RecallOutcome[D]:
    """The reranker's best ``limit`` of the pool, without those whose relevance is below ``floor``."""
    relevance = scored.relevance or []
    order = [index for index, _ in result.ranking or []]
    kept = [index for index, value in zip(order, relevance, strict=True) if value >= floor][:limit]
    return RecallOutcome(
        [pool[index] for index in kept], applied=True, scored=True, candidates=scored.candidates,
        elapsed_s=scored.elapsed_s, api=scored.api, change=scored.change, ranking=scored.ranking,
        retries=scored.retries, failover_to=scored.failover_to, relevance=relevance,
        rescued=sum(1 for index in kept if index >= limit), floor_dropped=len(scored.documents) - len(kept),
    )


def _counted(outcome: RecallOutcome[D]) -> RecallOutcome[D]:
    """Record the pool behind ``outcome`` (how many the stock answer has is what a recall returns)."""
    returned = outcome.floor_dropped + len(outcome.documents)
    stats_recorder().pool(outcome.candidates, returned, outcome.rescued, outcome.floor_dropped)
    return outcome
