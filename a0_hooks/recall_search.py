"""What the memory wrapper does with one search (state: none): pass it through, or rerank a recall.

A0's own call runs unchanged first: its answer is the fallback, stock by construction. Then the pool search,
the same call for ``max(limit, rerank_candidates)`` at ``rerank_pool_threshold`` (never above the caller's),
reusing its query embedding. All the plugin adds fits in ``rerank_timeout``, so a hanging store or API cannot
hold a recall whose stock answer is ready; as many memories come back as A0's call returned. Every failure
returns A0's answer: only the store's errors in the first search propagate. One line per reranked, shadow-scored
or fallen-back recall goes to the agent's A0 log: never document text, never the key.
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
from ..core.errors import ConfigError
from ..core.redaction import shown
from ..core.scores import RecallOutcome, page_content
from ..service.runtime import rerank_pool, stats_recorder
from . import recall_entry
from .recall_entry import RecallScope

log = logging.getLogger("a0_reranker")


@dataclass(frozen=True)
class AddedTime:
    """The plugin's time before A0's call and after its answer, which together fit in ``rerank_timeout``."""

    origin: float  # monotonic: when A0 answered, less our work before its call
    deadline: float

    @classmethod
    def since(cls, entered: float, asked: float, config: RerankerConfig) -> AddedTime:
        answered, before_s = clock.now(), asked - entered
        return cls(origin=answered - before_s, deadline=answered + max(0.0, config.timeout - before_s))

    def spent_s(self) -> float:
        return clock.now() - self.origin


async def search(original: Callable[..., Any], memory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The wrapped ``search_similarity_threshold``: stock outside recall, reranked inside it."""
    scope = recall_entry.current()
    if scope is None:
        return await original(memory, *args, **kwargs)
    entered = clock.now()
    plan = _plan(scope, original, memory, args, kwargs)
    if plan is None:
        return await original(memory, *args, **kwargs)
    call, config = plan
    with recall_entry.suspended(), recall_entry.shared_query_embedding(memory):
        asked = clock.now()
        stock = await original(memory, *args, **kwargs)
        if not stock:  # nothing found: nothing else is asked
            return stock
        added = AddedTime.since(entered, asked, config)
        pool = await fetch_pool(original, memory, call, config, stock, added.deadline)
    if pool.members is None:
        _fallback(scope, pool.reason, len(stock), len(stock), added, pool.message)
        return stock
    return await _choose(scope, call, config, stock, pool.members, added)


def _plan(
    scope: RecallScope, original: Callable[..., Any], memory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[SearchCall, RerankerConfig] | None:
    """The call and settings when this recall is to be reranked; None to run it stock. Never raises."""
    try:
        if not recall_entry.enabled_for(scope.agent):
            return None
        call = SearchCall.read(original, memory, args, kwargs)
        if call is None:
            return None
        try:
            config = recall_entry.resolve_config(agent=scope.agent)
        except ConfigError as exc:
            _note_bad_settings(scope, exc)
            return None
        return (call, config) if config.enabled and config.configured else None
    except Exception:
        log.exception("a0_reranker: could not prepare the rerank (recall runs stock)")
        return None


async def _choose(scope: RecallScope, call: SearchCall, config: RerankerConfig, stock: Any, pool: list[Any],
                  added: AddedTime) -> Any:
    """The reranker's best ``len(stock)`` of the pool (A0's answer first), or on any failure ``stock``."""
    if len(pool) < 2:
        stats_recorder().pool(len(pool), len(stock))
        return stock
    try:  # returns by the deadline plus the one backstop grace (service.runtime), whatever the server does
        outcome = await rerank_pool(call.query, pool, limit=len(stock), config=config, deadline=added.deadline)
    except Exception as exc:
        log.exception("a0_reranker: unexpected error while reranking (recall keeps its stock order)")
        _fallback(scope, "error", len(pool), len(stock), added, f"unexpected error: {type(exc).__name__}")
        return stock
    write_line(scope.agent, describe(outcome, scope.source, added.spent_s()))
    return outcome.documents if outcome.applied else stock


def _fallback(scope: RecallScope, reason: str, candidates: int, returned: int, added: AddedTime, message: str) -> None:
    stats_recorder().fell_back(reason, message)
    write_line(scope.agent, fallback_line(reason, scope.source, candidates, returned, added.spent_s()))


def _note_bad_settings(scope: RecallScope, exc: ConfigError) -> None:
    """Name the bad keys (not their values) in the agent's log and count a fallback."""
    keys = ", ".join(sorted({problem.split(":", 1)[0] for problem in exc.problems}))
    stats_recorder().fell_back("config", f"invalid settings: {keys}")
    write_line(scope.agent, f"Reranker skipped, recall runs stock: invalid settings ({keys})")


# --- the pool search ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchCall:
    """One call of ``search_similarity_threshold``, repeated in the caller's own shape (newer A0 adds
    keywords): only ``limit`` and ``threshold`` change."""

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


async def fetch_pool(original: Callable[..., Any], memory: Any, call: SearchCall, config: RerankerConfig,
                     stock: Sequence[Any], deadline: float) -> Pool:
    """The pool by ``deadline`` (monotonic), or A0's answer alone when it would ask for nothing more. On a
    timeout or error ``members`` is None and ``message`` says why without query or memory text."""
    limit = max(call.limit, config.candidates)
    threshold = None if call.threshold is None else min(config.pool_threshold, call.threshold)  # never above A0's
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
        said = shown(f"{type(exc).__name__}: {exc}", call.query, *(page_content(d) for d in stock))
        # the masked text, not the traceback: the store's error may quote the query and the memories
        log.warning("a0_reranker: the pool search failed (recall keeps its stock result): %s", said)
        return Pool(None, "pool_search", f"the pool search (the plugin's wider store search) raised {said}; "
                    "the recall kept A0's answer")


def stock_first(stock: Sequence[Any], found: Sequence[Any]) -> list[Any]:
    """A0's answer, then the pool's others (by identity: Documents compare by value)."""
    seen = {id(document) for document in stock}
    return [*stock, *(document for document in found if id(document) not in seen)]


# --- the recall's log line ---------------------------------------------------------------------


def describe(outcome: RecallOutcome[Any], source: str, added_s: float) -> str:
    """The log line for one recall whose pool went to the reranker."""
    ms = round(added_s * 1000)
    returned = len(outcome.documents)
    change = outcome.change
    if not outcome.scored or change is None:
        return fallback_line(outcome.reason or "error", source, outcome.candidates, returned, added_s)
    order = f"kept {change.kept}/{change.limit} of the stock top, mean shift {change.mean_displacement:.1f}"
    retries = "1 retry" if outcome.retries == 1 else f"{outcome.retries} retries"
    via = f"via {outcome.api}" + (f" after {retries}" if outcome.retries else "")
    if outcome.failover_to:  # the replica is named only then: which one answered matters when one failed
        via += f" (failed over to {outcome.failover_to})"
    if outcome.applied:
        return (f"Reranked {source}: {outcome.candidates} candidates -> {returned} returned in {ms} ms "
                f"{via}; {order}{_pool_effects(outcome)}")
    return (f"Reranker shadow mode, {source}: {outcome.candidates} candidates scored in {ms} ms {via}; "
            f"would have {order}; stock order returned ({returned})")


def _pool_effects(outcome: RecallOutcome[Any]) -> str:
    parts = [f"{outcome.rescued} rescued from outside the stock result"] if outcome.rescued else []
    if outcome.floor_dropped:
        parts.append(f"{outcome.floor_dropped} below rerank_min_score dropped")
    return "".join(f"; {part}" for part in parts)


_GLOSSES = {  # reasons whose name alone leaves a user guessing what to do
    "overload": "overload: the reranker is busier than rerank_timeout allows, so this recall did not wait",
    "queue_full": "queue_full: more than rerank_max_queued_pairs pairs were already waiting",
    "pool_search_timeout": "pool_search_timeout: the wider store search took longer than rerank_timeout",
}


def fallback_line(reason: str, source: str, candidates: int, returned: int, added_s: float) -> str:
    """The log line when a recall kept the stock order."""
    return (f"Reranker fell back to the stock order ({_GLOSSES.get(reason, reason)}): {source}, {candidates} "
            f"candidates, {returned} returned, {round(added_s * 1000)} ms")


def write_line(agent: Any, line: str) -> None:
    """Add ``line`` to the agent's log (the chat's log in the UI); never raises."""
    log.debug("a0_reranker: %s", line)
    try:
        agent.context.log.log(type="util", heading=line)
    except Exception:
        log.debug("a0_reranker: could not write to the agent's log", exc_info=True)
