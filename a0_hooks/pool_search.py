"""The pool search: the wider second search of a reranked recall, within the plugin's one deadline.

It asks A0's own method again, every argument as the caller gave it but two: ``max(limit,
rerank_candidates)`` memories at ``rerank_pool_threshold`` (never above the caller's threshold). A0's
answer is already in hand when it starts, so it counts against the same ``rerank_timeout`` as the
rerank after it: a store that hangs or an embedding API that does not answer must not hold a recall
whose stock answer is ready. Past the deadline it is cancelled and the recall keeps A0's answer
(``pool_search_timeout``); when it raises, likewise (``pool_search``). Either way the message says
why, for ``last_error``, without the query or memory text.

``SearchCall``: one call of ``search_similarity_threshold``, read and repeated in the caller's own
shape. A0's callers mix positional and keyword arguments (``delete_documents_by_query`` passes the query
positionally) and newer A0 adds keywords such as ``embedding=``. We read ``query``, ``limit`` and
``threshold`` by binding the call to the original's signature, and repeat it with another ``limit``
and ``threshold`` changing nothing else: a positional argument stays positional, unknown keywords
(a precomputed ``embedding`` included) pass through untouched, so every search we make uses the
caller's embedding.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.redaction import shown
from ..service.runtime import page_content

log = logging.getLogger("a0_reranker")


@dataclass(frozen=True)
class SearchCall:
    args: tuple[Any, ...]  # without ``self``
    kwargs: dict[str, Any]
    query: str
    limit: int
    threshold: float | None  # None when the caller's threshold is not a number (it is then kept as given)
    positions: dict[str, int]  # where ``limit`` and ``threshold`` sit in ``args`` when passed positionally

    @classmethod
    def read(cls, original: Callable[..., Any], memory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
             ) -> SearchCall | None:
        """The call's query, limit and threshold, or None when they are not what a rerank can work with."""
        try:
            signature = inspect.signature(original)
            bound = signature.bind(memory, *args, **kwargs)
        except (TypeError, ValueError):
            return None
        query, limit = bound.arguments.get("query"), bound.arguments.get("limit")
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            return None
        threshold = bound.arguments.get("threshold")
        number = float(threshold) if isinstance(threshold, int | float) and not isinstance(threshold, bool) else None
        names = [p.name for p in signature.parameters.values()][1:]  # without self
        positions: dict[str, int] = {name: names.index(name) for name in ("limit", "threshold")
                                     if name in names and name not in kwargs and names.index(name) < len(args)}
        return cls(args=tuple(args), kwargs=dict(kwargs), query=query, limit=limit, threshold=number,
                   positions=positions)

    def pool_threshold(self, wanted: float) -> float | None:
        """The threshold of the pool search: ``wanted``, but never above the caller's own."""
        return None if self.threshold is None else min(wanted, self.threshold)

    def replaced(self, *, limit: int, threshold: float | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The same call asking for ``limit`` results at ``threshold`` (None keeps the caller's)."""
        args, kwargs = list(self.args), dict(self.kwargs)
        changes: dict[str, Any] = {"limit": limit} if threshold is None else {"limit": limit, "threshold": threshold}
        for name, value in changes.items():
            if name in self.positions:
                args[self.positions[name]] = value
            else:
                kwargs[name] = value
        return tuple(args), kwargs


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
