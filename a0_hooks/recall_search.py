"""What the memory wrapper does with one search: pass it through, or rerank a recall.

Outside the recall scope (deletion, consolidation, the dashboard, memorize) the original runs with
the caller's own arguments and nothing else happens. Inside it, when the plugin is on for the agent,
``rerank_enabled`` is set and an endpoint is configured, the original is asked once for a pool of
``max(limit, rerank_candidates)`` and the pool goes to ``rerank_pool``.

Why the fallback is exactly stock: the store ranks best-first and ``k`` only truncates (FAISS
searches its ``fetch_k`` nearest, filters, applies the threshold, then keeps ``k``), so the first
``limit`` of the pool are what the original returns for ``limit``. Every failure returns that slice.
Exceptions raised by the store itself propagate unchanged; nothing of ours raises past this module.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from ..core.config import RerankerConfig
from ..core.errors import ConfigError
from ..service import runtime
from ..service.recall_pool import rerank_pool
from . import plugin_state, recall_log, recall_scope, settings
from .recall_scope import RecallScope
from .search_call import SearchCall

log = logging.getLogger("a0_reranker")

GUARD_GRACE_S: Final = 2.0  # the service keeps rerank_timeout itself; this only bounds a misbehaving path


async def search(original: Callable[..., Any], memory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The wrapped ``search_similarity_threshold``: stock outside recall, reranked inside it."""
    scope = recall_scope.current()
    if scope is None:
        return await original(memory, *args, **kwargs)
    plan = _plan(scope, original, memory, args, kwargs)
    if plan is None:
        return await original(memory, *args, **kwargs)
    call, config = plan
    pool_args, pool_kwargs = call.with_limit(max(call.limit, config.candidates))
    with recall_scope.suspended():
        pool = list(await original(memory, *pool_args, **pool_kwargs))
    return await _choose(scope, call, config, pool)


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


async def _choose(scope: RecallScope, call: SearchCall, config: RerankerConfig, pool: list[Any]) -> list[Any]:
    """The reranked best ``limit`` of the pool, or on any failure its stock first ``limit``."""
    stock = pool[: call.limit]
    if len(pool) < 2:
        return stock
    started = time.monotonic()
    try:
        outcome = await asyncio.wait_for(
            rerank_pool(call.query, pool, limit=call.limit, config=config), config.timeout + GUARD_GRACE_S
        )
    except TimeoutError:  # the service overran its own deadline: counted apart from its "timeout"
        _fallback(scope, "recall_deadline", len(pool), len(stock), started)
        return stock
    except Exception:
        log.exception("a0_reranker: unexpected error while reranking (recall keeps its stock order)")
        _fallback(scope, "error", len(pool), len(stock), started)
        return stock
    recall_log.write(scope.agent, recall_log.describe(outcome, scope.source))
    return outcome.documents


def _fallback(scope: RecallScope, reason: str, candidates: int, returned: int, started: float) -> None:
    runtime.stats_recorder().fallback(reason)
    line = recall_log.fallback_line(reason, scope.source, candidates, returned, time.monotonic() - started)
    recall_log.write(scope.agent, line)


def _note_bad_settings(scope: RecallScope, exc: ConfigError) -> None:
    """Name the bad keys (not their values) in the agent's log and count a fallback."""
    keys = ", ".join(sorted({problem.split(":", 1)[0] for problem in exc.problems}))
    runtime.stats_recorder().fallback("config", f"invalid settings: {keys}")
    recall_log.write(scope.agent, f"Reranker skipped, recall runs stock: invalid settings ({keys})")
