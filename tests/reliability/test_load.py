"""Load (issue 7), smaller than ``bench/load_flaky.py`` but with the same checks: many concurrent recalls
against a server that fails 10% of requests and holds 5% past the timeout. No exception escapes, no
memory is lost or duplicated, every fallback is stock and every reranking is the server's, each fallback
is counted once with its reason, the queue stays within its bound, and resident memory stays flat.
"""

from __future__ import annotations

import asyncio

import pytest

from support.counters import settled_statistics
from usr.plugins.a0_reranker.bench.load_flaky import LoadPlan, LoadReport, load_config, run_load
from usr.plugins.a0_reranker.bench.load_flaky_server import Flakiness, FlakyServer

pytestmark = pytest.mark.load

FLAKY = Flakiness(error_rate=0.10, hang_rate=0.05, hang_s=2.0, seed=3)


def measured(plan: LoadPlan, flakiness: Flakiness = FLAKY, **settings: object) -> LoadReport:
    with FlakyServer(flakiness) as server:
        return asyncio.run(run_load("test", plan, load_config(server.url, timeout=0.5, **settings)))


def assert_contract_held(report: LoadReport) -> None:
    assert report.exceptions == []
    assert report.violations == []
    assert report.max_queued_pairs <= report.queue_bound
    # Each fallback counted once, under its reason: read once the owner loop has counted every outcome (it
    # counts at the deadline; a caller's backstop may return a grace before that on a busy machine).
    assert dict(settled_statistics().fallbacks) == report.fallbacks
    assert sum(report.outcomes.values()) == report.recalls
    assert report.rss_growth_mb < 20, report.summary()


def test_the_batcher_under_a_flaky_server_keeps_the_contract() -> None:
    plan = LoadPlan(recalls=1200, concurrency=128, warmup=200)
    report = measured(plan, breaker_failures=1000, breaker_failure_rate=1, max_queued_pairs=768)  # a bound 128 agents do reach
    assert_contract_held(report)
    assert report.outcomes["reranked"] > plan.recalls // 5
    assert {"timeout", "queue_full"} <= report.fallbacks.keys(), report.summary()
    assert report.retries > 0, report.summary()  # the 503s were sent again
    assert report.queue_samples > 10 and report.max_queued_pairs > 0


def test_the_default_breaker_opens_and_every_recall_gets_stock_at_once() -> None:
    """At 15% failures the default breaker stays closed (that is the point of its failure-rate trigger);
    a server that fails more than half of its requests opens it."""
    failing = Flakiness(error_rate=0.5, hang_rate=0.05, hang_s=2.0, seed=3)
    report = measured(LoadPlan(recalls=600, concurrency=128, warmup=200), failing)
    assert_contract_held(report)
    assert report.fallbacks.get("breaker_open", 0) > 0
    assert "open" in report.breakers.values() or "half_open" in report.breakers.values()
