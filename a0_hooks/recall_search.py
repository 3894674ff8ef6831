"""What the memory wrapper does with one search: pass it through, or rerank a recall.

Outside the recall scope (deletion, consolidation, the dashboard, memorize) the original runs with
the caller's own arguments and nothing else happens. Inside it, when the plugin is on for the agent,
``rerank_enabled`` is set and an endpoint is configured, two searches go to the original method:

1. the caller's own call, unchanged: A0's answer, which is also the fallback, so the fallback is
   stock by construction (the same objects in the same order). Nothing found: nothing is returned
   and nothing else is asked.
2. a wider one for the pool: ``max(limit, rerank_candidates)`` memories at ``rerank_pool_threshold``
   (never above the caller's threshold), every other argument as the caller gave it (a precomputed
   ``embedding`` included).

The pool goes to ``rerank_pool`` with A0's answer first, and as many memories come back as A0's own
call returned: A0 decides how many, the reranker which. Every failure returns A0's answer. Exceptions
raised by the store in the first search propagate unchanged; nothing of ours raises past this module.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..core.config import RerankerConfig
from ..core.errors import ConfigError
from ..service.accounting import Accounting
from ..service.recall_pool import rerank_pool
from . import plugin_state, recall_log, recall_scope, settings
from .recall_scope import RecallScope
from .search_call import SearchCall

log = logging.getLogger("a0_reranker")


async def search(original: Callable[..., Any], memory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The wrapped ``search_similarity_threshold``: stock outside recall, reranked inside it."""
    scope = recall_scope.current()
    if scope is None:
        return await original(memory, *args, **kwargs)
    plan = _plan(scope, original, memory, args, kwargs)
    if plan is None:
        return await original(memory, *args, **kwargs)
    call, config = plan
    with recall_scope.suspended():
        stock = await original(memory, *args, **kwargs)
        if not stock:
            return stock
        pool = await _wider(original, memory, call, config, stock)
    if pool is None:
        _fallback(scope, "pool_search", len(stock), len(stock), time.monotonic())
        return stock
    return await _choose(scope, call, config, stock, _stock_first(stock, pool))


async def _wider(original: Callable[..., Any], memory: Any, call: SearchCall, config: RerankerConfig,
                 stock: Sequence[Any]) -> list[Any] | None:
    """The pool search, or A0's answer when it would ask for nothing more; None if it fails."""
    limit, threshold = max(call.limit, config.candidates), call.pool_threshold(config.pool_threshold)
    if limit == call.limit and threshold == call.threshold:
        return list(stock)
    args, kwargs = call.replaced(limit=limit, threshold=threshold)
    try:
        return list(await original(memory, *args, **kwargs))
    except Exception:  # A0's own call succeeded, so stock A0 would not have failed: keep its answer
        log.warning("a0_reranker: the pool search failed (recall keeps its stock result)", exc_info=True)
        return None


def _stock_first(stock: Sequence[Any], pool: Sequence[Any]) -> list[Any]:
    """A0's answer, then the pool's other memories in embedding order (by identity: Documents compare
    by value, and two memories may hold the same text)."""
    seen = {id(document) for document in stock}
    return [*stock, *(document for document in pool if id(document) not in seen)]


def _plan(
    scope: RecallScope, original: Callable[..., Any], memory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[SearchCall, RerankerConfig] | None:
    """The call and settings when this recall is to be reranked; None to run it stock. Never raises."""
    try:
        if not plugin_state.enabled_for(scope.agent):
            return None
        call = SearchCall.read(original, memory, args, kwargs)
        if call is None:
            return None
        try:
            config = settings.resolve_config(agent=scope.agent)
        except ConfigError as exc:
            _note_bad_settings(scope, exc)
            return None
        return (call, config) if config.enabled and config.configured else None
    except Exception:
        log.exception("a0_reranker: could not prepare the rerank (recall runs stock)")
        return None


async def _choose(scope: RecallScope, call: SearchCall, config: RerankerConfig, stock: Any,
                  pool: list[Any]) -> Any:
    """The reranker's best ``len(stock)`` of the pool (A0's answer first), or on any failure ``stock``."""
    if len(pool) < 2:
        Accounting().pool(len(pool), len(stock))
        return stock
    started = time.monotonic()
    try:  # returns by rerank_timeout plus the one backstop grace (service.runtime), whatever the server does
        outcome = await rerank_pool(call.query, pool, limit=len(stock), config=config)
    except Exception:
        log.exception("a0_reranker: unexpected error while reranking (recall keeps its stock order)")
        _fallback(scope, "error", len(pool), len(stock), started)
        return stock
    recall_log.write(scope.agent, recall_log.describe(outcome, scope.source))
    return outcome.documents if outcome.applied else stock


def _fallback(scope: RecallScope, reason: str, candidates: int, returned: int, started: float) -> None:
    Accounting().fell_back(reason)
    line = recall_log.fallback_line(reason, scope.source, candidates, returned, time.monotonic() - started)
    recall_log.write(scope.agent, line)


def _note_bad_settings(scope: RecallScope, exc: ConfigError) -> None:
    """Name the bad keys (not their values) in the agent's log and count a fallback."""
    keys = ", ".join(sorted({problem.split(":", 1)[0] for problem in exc.problems}))
    Accounting().fell_back("config", f"invalid settings: {keys}")
    recall_log.write(scope.agent, f"Reranker skipped, recall runs stock: invalid settings ({keys})")
