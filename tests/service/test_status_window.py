"""The status's latency and queue-wait percentiles are the recent ones (``LATENCY_WINDOW_S`` on the counters'
clock): after a quiet spell the status says there were no recent reranks instead of showing old figures as
if they were current. The process's counters themselves (reranks, requests) are totals and stay."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.deadlines import ManualClock
from support.encoding import recall
from support.servers import RunningServer
from usr.plugins.a0_reranker.a0_hooks import status
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.statistics import LATENCY_WINDOW_S, StatsRecorder
from usr.plugins.a0_reranker.service import calls, runtime

pytestmark = pytest.mark.anyio


@pytest.fixture
def stats_clock() -> Iterator[ManualClock]:
    """The process's counters on a clock of the test's, read by a runtime started for them."""
    manual = ManualClock()
    calls._STATS.discard()
    calls._STATS.get(lambda: StatsRecorder(clock=manual))
    runtime.restart(clock=clock.now)
    yield manual
    runtime.shutdown()
    calls._STATS.discard()  # the next test gets the process's usual counters


def tool_text(config: RerankerConfig) -> str:
    """What the ``reranker_status`` tool says (no live probe), through the tool's own functions."""
    return status.format_report(status.snapshot(None, ({}, config, [])), None)


async def test_percentiles_cover_the_recent_window_and_say_when_it_is_empty(
        vllm_server: RunningServer, stats_clock: ManualClock) -> None:
    config = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=10.0)
    for q in range(3):
        assert await runtime.rerank_async(*recall(q, 4), config=config) is not None
    fresh = runtime.statistics()
    assert fresh.latency_p50_ms is not None and fresh.latency_p95_ms is not None
    assert fresh.load.queue_wait_p50_ms is not None
    stats_clock.now += LATENCY_WINDOW_S + 1  # a quiet spell: no rerank in the window
    quiet = runtime.statistics()
    assert (quiet.latency_p50_ms, quiet.latency_p95_ms) == (None, None)
    assert (quiet.load.queue_wait_p50_ms, quiet.load.queue_wait_p95_ms) == (None, None)
    assert (quiet.reranked, quiet.http_requests) == (fresh.reranked, fresh.http_requests)  # totals stay
    text = tool_text(config)
    assert f"Latency p50/p95: no rerank in the last {LATENCY_WINDOW_S / 60:g} minutes" in text, text
    assert await runtime.rerank_async(*recall(9, 4), config=config) is not None
    assert runtime.statistics().latency_p50_ms is not None  # a new rerank: figures again
    assert f"Latency p50/p95 (last {LATENCY_WINDOW_S / 60:g} minutes): " in tool_text(config)
