"""Failover under load (issue 11): three replicas, 1,200 recalls at concurrency 24, and the first replica
killed (SIGKILL) a third of the way through. The scenario is ``bench/load_failover.py``; every recall
is checked there: the server's order when reranked, exactly stock when not, within its deadline.
"""

from __future__ import annotations

import asyncio

import pytest

from usr.plugins.a0_reranker.bench.load_failover import GOAL, FailoverPlan, run_failover

pytestmark = pytest.mark.load


def test_a_replica_killed_mid_run_costs_under_one_percent_of_the_recalls() -> None:
    plan = FailoverPlan(recalls=1200, concurrency=24)
    report = asyncio.run(run_failover(plan))
    load = report.load
    assert load.exceptions == []
    assert load.violations == [], load.violations[:5]  # every reranking the server's, every fallback stock
    assert load.late_recalls == 0, report.summary()  # none past rerank_timeout + 100 ms
    assert sum(load.outcomes.values()) == plan.recalls
    assert load.counted_fallbacks == load.fallbacks  # each fallback counted once, under its reason
    assert load.reranked_share >= GOAL, report.summary()
    assert report.killed_after == plan.recalls // 3
    replicas = {r["url"]: r for r in report.replicas}
    assert replicas[report.killed]["breaker"] != "closed", report.summary()  # the dead replica was ejected
    survivors = [r for url, r in replicas.items() if url != report.killed]
    assert all(r["share"] > replicas[report.killed]["share"] for r in survivors), report.summary()
