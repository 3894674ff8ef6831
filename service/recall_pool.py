"""What a reranked recall returns, given the candidate pool in stock order (no A0 knowledge here).

The memory wrapper fetches a pool larger than A0 asked for, and this module decides what to hand
back: the best ``limit`` by the reranker when reranking applies, the stock top-``limit`` in shadow
mode (with the order change recorded) and on any failure. It never mutates the documents; it only
picks among them. The demo and the CLI use this same function, so they show what the plugin does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..core.config import RerankerConfig
from ..core.ranking import OrderChange, order_change
from . import runtime

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
    ranking: list[tuple[int, float]] | None = None
    reason: str = ""  # why the stock order was kept, when the reranker did not answer
    message: str = ""
    retries: int = 0  # requests sent again before the reranker answered


async def rerank_pool(
    query: str,
    pool: Sequence[D],
    *,
    limit: int,
    config: RerankerConfig,
    text_of: Callable[[D], str] = page_content,
) -> RecallOutcome[D]:
    """Rerank ``pool`` (stock order, best first) for ``query`` and keep ``limit`` documents.

    Returns the stock top-``limit`` when the reranker is unavailable or in shadow mode.
    """
    started = time.monotonic()
    stock = list(pool[:limit])
    if len(pool) < 2 or limit <= 0:
        return RecallOutcome(stock, applied=False, scored=False, candidates=len(pool), elapsed_s=0.0)
    result = await runtime.rerank_result_async(query, [text_of(d) for d in pool], config=config)
    elapsed = time.monotonic() - started
    ranking, api = result.ranking, result.api
    if ranking is None or len(ranking) != len(pool):
        return RecallOutcome(stock, applied=False, scored=False, candidates=len(pool), elapsed_s=elapsed,
                             reason=result.reason or "error", message=result.message)
    order = [index for index, _ in ranking]
    change = order_change(order, min(limit, len(pool)))
    if not config.apply:
        runtime.stats_recorder().shadow_compared(change.kept / change.limit if change.limit else 1.0,
                                                 change.mean_displacement)
        return RecallOutcome(stock, applied=False, scored=True, candidates=len(pool), elapsed_s=elapsed,
                             api=api, change=change, ranking=ranking, retries=result.retries)
    chosen = [pool[index] for index in order[:limit]]
    return RecallOutcome(chosen, applied=True, scored=True, candidates=len(pool), elapsed_s=elapsed,
                         api=api, change=change, ranking=ranking, retries=result.retries)
