"""One short line in the agent's A0 log per reranked or shadow-scored recall, so a user can watch it work.

It says how many candidates were scored, how many were returned, how long the plugin made the search
take (everything it added to A0's own call: the pool search and the rerank included), which API
answered (whether the request had to be sent again, and the replica that answered when it failed
over to another), how much the order changed (memories kept
in the top ``limit`` and their mean shift), how many returned memories the stock result did not hold
(rescued) and how many the relevance floor left out; on a fallback, why. Never document text (a
server's error body may echo documents) and never the key.
"""

from __future__ import annotations

import logging
from typing import Any

from ..service.recall_pool import RecallOutcome

log = logging.getLogger("a0_reranker")


def describe(outcome: RecallOutcome[Any], source: str, added_s: float) -> str:
    """The log line for one recall whose pool went to the reranker, which added ``added_s`` in all."""
    ms = round(added_s * 1000)
    returned = len(outcome.documents)
    change = outcome.change
    if not outcome.scored or change is None:
        return fallback_line(outcome.reason or "error", source, outcome.candidates, returned, added_s)
    order = f"kept {change.kept}/{change.limit} of the stock top, mean shift {change.mean_displacement:.1f}"
    via = f"via {outcome.api}" + (f" after {_retries(outcome.retries)}" if outcome.retries else "")
    if outcome.failover_to:  # the replica is named only then: which one answered matters when one failed
        via += f" (failed over to {outcome.failover_to})"
    if outcome.applied:
        return (f"Reranked {source}: {outcome.candidates} candidates -> {returned} returned in {ms} ms "
                f"{via}; {order}{_pool_effects(outcome)}")
    return (f"Reranker shadow mode, {source}: {outcome.candidates} candidates scored in {ms} ms {via}; "
            f"would have {order}; stock order returned ({returned})")


def _retries(count: int) -> str:
    return "1 retry" if count == 1 else f"{count} retries"


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
    """The log line when a recall kept the stock order (the reranker failed, or the recall code gave up)."""
    return (f"Reranker fell back to the stock order ({_GLOSSES.get(reason, reason)}): {source}, {candidates} "
            f"candidates, {returned} returned, {round(added_s * 1000)} ms")


def write(agent: Any, line: str) -> None:
    """Add ``line`` to the agent's log (the chat's log in the UI); never raises."""
    log.debug("a0_reranker: %s", line)
    try:
        agent.context.log.log(type="util", heading=line)
    except Exception:
        log.debug("a0_reranker: could not write to the agent's log", exc_info=True)
