"""How long one A0 recall can take with the reranker, against what A0's own limit leaves, and settings that
work against each other. A0 runs the whole recall, its optional LLM steps included, inside one 30 s
``asyncio.wait_for`` (``_50_recall_memories.py``, v1.7 and newer; docs/a0-integration.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from .config import BATCH_WINDOW_SHARE, RerankerConfig, setting_key
from .deadline import BACKSTOP_GRACE_S

A0_SEARCH_TIMEOUT_S: Final = 30.0
SEARCHES_PER_RECALL: Final = 2  # memories, then solutions
STORE_SEARCHES_S: Final = 1.0  # A0's own two store searches, query embeddings included, at most
SENSIBLE_REPLICAS: Final = 16  # busy with 32 requests in flight: more than one process's agents recall at once
LLM_STEP_RESERVE_S: Final = 5.0  # one utility-model call: a short answer to a few thousand tokens of history


@dataclass(frozen=True)
class RecallSteps:
    """A0's optional LLM steps of a recall that are on (``memory_recall_query_prep``, ``_post_filter``)."""

    query_prep: bool = False
    post_filter: bool = False

    @property
    def llm_calls(self) -> int:
        return int(self.query_prep) + int(self.post_filter)

    @property
    def names(self) -> str:
        steps = (("query preparation", self.query_prep), ("post-filter", self.post_filter))
        return " and ".join(name for name, is_on in steps if is_on)


NO_LLM_STEPS: Final = RecallSteps()


def left_for_reranking_s(steps: RecallSteps = NO_LLM_STEPS) -> float:
    return A0_SEARCH_TIMEOUT_S - steps.llm_calls * LLM_STEP_RESERVE_S


def worst_recall_s(config: RerankerConfig) -> float:
    return SEARCHES_PER_RECALL * (config.timeout + BACKSTOP_GRACE_S) + STORE_SEARCHES_S


def longest_safe_timeout_s(steps: RecallSteps = NO_LLM_STEPS) -> float:
    """The largest ``rerank_timeout`` whose worst case stays within A0's recall limit."""
    return float(math.floor((left_for_reranking_s(steps) - STORE_SEARCHES_S) / SEARCHES_PER_RECALL
                            - BACKSTOP_GRACE_S))


def budget_line(config: RerankerConfig, steps: RecallSteps = NO_LLM_STEPS) -> str:
    return f"a recall waits for the reranker at most {worst_recall_s(config):g} s of {_budget_text(steps)}"


def _budget_text(steps: RecallSteps) -> str:
    limit = f"Agent Zero's {A0_SEARCH_TIMEOUT_S:g} s recall limit"
    if not steps.llm_calls:
        return limit
    calls, each = ("call", "") if steps.llm_calls == 1 else ("calls", " each")
    return (f"the {left_for_reranking_s(steps):g} s that {limit} leaves after its {steps.names} LLM {calls} "
            f"(counted {LLM_STEP_RESERVE_S:g} s{each})")


def warnings(config: RerankerConfig, steps: RecallSteps = NO_LLM_STEPS) -> list[str]:
    """Settings that are valid but work against A0 or each other, in plain words."""
    found = []
    if (worst := worst_recall_s(config)) > left_for_reranking_s(steps):
        found.append(f"{setting_key('timeout')} {config.timeout:g} s: a recall reranks two searches, so it can wait "
                     f"up to {worst:g} s, past {_budget_text(steps)}, which then drops the whole recall (no memories "
                     f"at all, not the stock ones). Keep it at {longest_safe_timeout_s(steps):g} s or below.")
    if (window_s := config.batch_window_ms / 1000) > BATCH_WINDOW_SHARE * config.timeout:
        found.append(f"{setting_key('batch_window_ms')} {config.batch_window_ms:g} ms is "
                     f"{window_s / config.timeout:.0%} of {setting_key('timeout')} ({config.timeout:g} s): a request "
                     f"waits for others to join it at most {BATCH_WINDOW_SHARE:.0%} of the timeout "
                     f"({BATCH_WINDOW_SHARE * config.timeout * 1000:g} ms here), so the rest of the window is never "
                     f"used; 10 ms is plenty for agents recalling together.")
    if (count := len(config.endpoints)) > SENSIBLE_REPLICAS:
        found.append(f"{setting_key('endpoint')} lists {count} servers: more than {SENSIBLE_REPLICAS} replicas of one "
                     f"model is more than the recalls of one Agent Zero process keep busy (a replica is busy with two "
                     f"requests in flight), and each one is detected on its own, probed every "
                     f"{setting_key('breaker_cooldown')} while it is down and listed in the status. List the servers "
                     f"of this model that recalls need, or put a load balancer in front of a larger pool and list its "
                     f"address.")
    return found
