"""How long one A0 recall can take with the reranker, against A0's own limit for it, and settings that
work against each other.

A0's recall extension runs the memories search and then the solutions search inside one
``asyncio.wait_for(..., SEARCH_TIMEOUT)`` of 30 s (v1.7 and newer); past it the recall is cancelled
and the agent's turn goes on without memories. Each reranked search costs two store searches
(milliseconds) and one rerank, which keeps ``rerank_timeout`` itself (its retries and hedges
included): its caller's backstop gives up ``BACKSTOP_GRACE_S`` after it at the latest. So the worst
case of one recall is about twice ``rerank_timeout + BACKSTOP_GRACE_S``, plus the store searches;
settings that exceed A0's limit get a warning (the largest safe timeout, in whole seconds, is 14).
"""

from __future__ import annotations

import math
from typing import Final

from .config import BATCH_WINDOW_SHARE, RerankerConfig, setting_key
from .deadline import BACKSTOP_GRACE_S

A0_SEARCH_TIMEOUT_S: Final = 30.0
SEARCHES_PER_RECALL: Final = 2  # memories, then solutions
STORE_SEARCHES_S: Final = 1.0  # the recall's four store searches, query embeddings included, at most


def worst_recall_s(config: RerankerConfig) -> float:
    """The longest one recall can wait for the reranker."""
    return SEARCHES_PER_RECALL * (config.timeout + BACKSTOP_GRACE_S) + STORE_SEARCHES_S


def longest_safe_timeout_s() -> float:
    """The largest ``rerank_timeout`` whose worst case stays within A0's recall limit."""
    return float(math.floor((A0_SEARCH_TIMEOUT_S - STORE_SEARCHES_S) / SEARCHES_PER_RECALL - BACKSTOP_GRACE_S))


def warnings(config: RerankerConfig) -> list[str]:
    """Plain-language warnings about settings that are valid but work against A0 or each other (empty:
    none)."""
    return [warning for check in (_past_a0s_limit, _window_against_timeout) if (warning := check(config))]


def _past_a0s_limit(config: RerankerConfig) -> str | None:
    worst = worst_recall_s(config)
    if worst <= A0_SEARCH_TIMEOUT_S:
        return None
    return (f"{setting_key('timeout')} {config.timeout:g} s: a recall reranks two searches, so it can wait up to "
            f"{worst:g} s, past Agent Zero's {A0_SEARCH_TIMEOUT_S:g} s recall limit, which then drops the whole "
            f"recall (no memories at all, not the stock ones). Keep it at {longest_safe_timeout_s():g} s or below.")


def _window_against_timeout(config: RerankerConfig) -> str | None:
    """While other requests are in flight a request waits up to the batch window for company, but never
    more than ``BATCH_WINDOW_SHARE`` of its recalls' timeout: a longer window is not what it seems."""
    window_s = config.batch_window_ms / 1000
    if window_s <= BATCH_WINDOW_SHARE * config.timeout:
        return None
    return (f"{setting_key('batch_window_ms')} {config.batch_window_ms:g} ms is {window_s / config.timeout:.0%} of "
            f"{setting_key('timeout')} ({config.timeout:g} s): a request waits for others to join it at most "
            f"{BATCH_WINDOW_SHARE:.0%} of the timeout ({BATCH_WINDOW_SHARE * config.timeout * 1000:g} ms here), so "
            f"the rest of the window is never used; 10 ms is plenty for agents recalling together.")
