"""The pool search: the wider second search of a reranked recall, within the plugin's one deadline.

It asks A0's own method again, every argument as the caller gave it but two: ``max(limit,
rerank_candidates)`` memories at ``rerank_pool_threshold`` (never above the caller's threshold). A0's
answer is already in hand when it starts, so it counts against the same ``rerank_timeout`` as the
rerank after it: a store that hangs or an embedding API that does not answer must not hold a recall
whose stock answer is ready. Past the deadline it is cancelled and the recall keeps A0's answer
(``pool_search_timeout``); when it raises, likewise (``pool_search``). Either way the message says
why, for ``last_error``, without the query or memory text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.redaction import shown
from ..service.recall_pool import page_content
from .search_call import SearchCall

log = logging.getLogger("a0_reranker")


@dataclass(frozen=True)
class Pool:
    """A0's answer and then the pool's other memories; or, when the search gave none, why not."""

    members: list[Any] | None
    reason: str = ""
    message: str = ""


async def fetch(original: Callable[..., Any], memory: Any, call: SearchCall, config: RerankerConfig,
                stock: Sequence[Any], deadline: float) -> Pool:
    """The pool by ``deadline`` (monotonic), or A0's answer alone when it would ask for nothing more."""
    limit, threshold = max(call.limit, config.candidates), call.pool_threshold(config.pool_threshold)
    if limit == call.limit and threshold == call.threshold:
        return Pool(list(stock))
    bound = asyncio.timeout(max(0.0, deadline - clock.now()))
    try:
        args, kwargs = call.replaced(limit=limit, threshold=threshold)
        async with bound:
            found = await original(memory, *args, **kwargs)
        return Pool(stock_first(stock, found))
    except Exception as exc:  # A0's own call succeeded, so stock A0 would not have failed: keep its answer
        if isinstance(exc, TimeoutError) and bound.expired():
            return Pool(None, "pool_search_timeout", f"the pool search (the plugin's wider store search) took "
                        f"longer than rerank_timeout ({config.timeout:g} s); the recall kept A0's answer")
        log.warning("a0_reranker: the pool search failed (recall keeps its stock result)", exc_info=True)
        said = shown(f"{type(exc).__name__}: {exc}", call.query, *(page_content(d) for d in stock))
        return Pool(None, "pool_search", f"the pool search (the plugin's wider store search) raised {said}; "
                    "the recall kept A0's answer")


def stock_first(stock: Sequence[Any], found: Sequence[Any]) -> list[Any]:
    """A0's answer, then the pool's other memories in embedding order (by identity: Documents compare
    by value, and two memories may hold the same text)."""
    seen = {id(document) for document in stock}
    return [*stock, *(document for document in found if id(document) not in seen)]
