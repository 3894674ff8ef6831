"""The status's latency and queue-wait percentiles are the recent ones (``LATENCY_WINDOW_S`` on the counters'
clock): after a quiet spell the status says there were no recent reranks instead of showing old figures as
if they were current. The process's counters themselves (reranks, requests) are totals and stay."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.deadlines import ManualClock
from support.encoding import encoding_scorer, recall
from support.servers import RunningServer, start_server
from usr.plugins.a0_reranker.a0_hooks import status
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.statistics import LATENCY_WINDOW, LATENCY_WINDOW_S, StatsRecorder
from usr.plugins.a0_reranker.service import calls, runtime

pytestmark = pytest.mark.anyio


SHORT_WINDOW_S = 120.0  # not the usual 5 minutes: the status must name the window the counters use


@pytest.fixture(params=[LATENCY_WINDOW_S])
def stats_clock(request: pytest.FixtureRequest) -> Iterator[ManualClock]:
    """The process's counters on a clock of the test's (and a window of ``request.param``), read by a runtime
    started for them."""
    manual = ManualClock()
    calls._STATS.discard()
    calls._STATS.get(lambda: StatsRecorder(clock=manual, window_s=request.param))
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


def server_row(config: RerankerConfig) -> dict[str, object]:
    """The settings' one server as the status's JSON has it (the API's and the CLI's form)."""
    (row,) = status.snapshot(None, ({}, config, []))["statistics"]["replicas"]
    return row


async def test_a_servers_latency_covers_the_recent_window_and_is_none_after_a_quiet_spell(
        vllm_server: RunningServer, stats_clock: ManualClock) -> None:
    """A row's running average outlived an hour's silence (or a server that got faster): its figures are those
    of the window, as the percentiles', and none when the server answered nothing in it."""
    config = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=10.0)
    for q in range(3):
        assert await runtime.rerank_async(*recall(q, 4), config=config) is not None
    fresh = server_row(config)
    assert fresh["latency_ms"] is not None and fresh["ms_per_pair"] is not None, fresh
    stats_clock.now += LATENCY_WINDOW_S + 1
    quiet = server_row(config)
    assert (quiet["latency_ms"], quiet["ms_per_pair"], quiet["pairs"]) == (None, None, fresh["pairs"]), quiet
    assert f"no answer in the last {LATENCY_WINDOW_S / 60:g} minutes" in tool_text(config)
    assert await runtime.rerank_async(*recall(9, 4), config=config) is not None
    again = server_row(config)
    assert again["latency_ms"] is not None and again["ms_per_pair"] is not None, again
    assert " ms per request, " in tool_text(config)


async def test_a_quiet_servers_row_keeps_its_latency_while_a_busy_one_answers_thousands(
        vllm_server: RunningServer, stats_clock: ManualClock) -> None:
    """The answers of every server shared one list of the last 2,048: a busy server (another scope's, here)
    pushed a quiet one's answer of a minute ago out, and the quiet server's row read as idle ("no answer")
    while its answer was inside the window. Each server's row covers its own answers."""
    quiet = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=10.0)
    assert await runtime.rerank_async(*recall(0, 4), config=quiet) is not None
    answered = server_row(quiet)
    assert answered["latency_ms"] is not None, answered
    stats_clock.now += 60
    other = await start_server("vllm", scorer=encoding_scorer)
    try:
        busy = RerankerConfig(endpoint=other.url, api="rerank", timeout=10.0)
        for q in range(LATENCY_WINDOW + 1):  # one after another: each its own request and answer
            assert await runtime.rerank_async(*recall(q, 2), config=busy) is not None
        assert runtime.statistics().http_requests >= LATENCY_WINDOW + 2
        (busy_row,) = status.snapshot(None, ({}, busy, []))["statistics"]["replicas"]
        assert busy_row["latency_ms"] is not None, busy_row
    finally:
        await other.close()
    row = server_row(quiet)
    assert (row["latency_ms"], row["ms_per_pair"]) == (answered["latency_ms"], answered["ms_per_pair"]), row
    assert " ms per request, " in tool_text(quiet)
    stats_clock.now += LATENCY_WINDOW_S  # now past the window: its figures age out as before
    assert (server_row(quiet)["latency_ms"], server_row(quiet)["ms_per_pair"]) == (None, None)


async def test_the_last_error_says_how_long_ago_it_happened(stats_clock: ManualClock) -> None:
    """``last_error`` read as the current problem hours later: the status gives its age on the counters' clock,
    in the tool's text and as ``last_error_age_s`` in the JSON; the key stays out of both."""
    dead = await start_server("vllm", scorer=encoding_scorer)
    await dead.close()  # nothing listens there now: the rerank falls back with an error
    config = RerankerConfig(endpoint=dead.url, api="rerank", timeout=10.0, api_key="sk-live-7f3Zq9")
    assert status.snapshot(None, ({}, config, []))["statistics"]["last_error_age_s"] is None  # no error yet
    assert await runtime.rerank_async(*recall(0, 4), config=config) is None
    stats_clock.now += 180
    stats = status.snapshot(None, ({"rerank_api_key": config.api_key}, config, []))["statistics"]
    assert stats["last_error"] and stats["last_error_age_s"] == 180, stats
    text = tool_text(config)
    assert "last error (3 min ago): " in text, text
    assert config.api_key not in text and config.api_key not in str(stats)


@pytest.mark.parametrize("stats_clock", [SHORT_WINDOW_S], indirect=True)
async def test_the_status_names_the_window_and_the_age_the_counters_have(
        vllm_server: RunningServer, stats_clock: ManualClock) -> None:
    """The tool's text and the JSON the panel shows say one window and one age in words, the counters': a
    window of 2 minutes is named so, and empties the percentiles after 2 minutes."""
    config = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=10.0)
    assert await runtime.rerank_async(*recall(0, 4), config=config) is not None
    dead = await start_server("vllm", scorer=encoding_scorer)
    await dead.close()
    assert await runtime.rerank_async(*recall(1, 4), config=RerankerConfig(endpoint=dead.url, api="rerank")) is None
    stats_clock.now += SHORT_WINDOW_S + 1  # past this window, well inside the usual one
    stats = status.snapshot(None, ({}, config, []))["statistics"]
    assert (stats["latency_window_s"], stats["latency_window"], stats["last_error_age"]) == (
        SHORT_WINDOW_S, "last 2 minutes", "2 min ago"), stats
    text = tool_text(config)
    assert "Latency p50/p95: no rerank in the last 2 minutes" in text, text
    assert "no answer in the last 2 minutes" in text and "last error (2 min ago): " in text, text


async def test_the_starved_pool_hint_is_judged_on_the_counts_not_the_rounded_figure(
        stats_clock: ManualClock) -> None:
    """124 of 250 pools starved is 49.6%, shown as 0.5: under half, so no hint; one more starved pool is half."""
    config = RerankerConfig(endpoint="http://127.0.0.1:9/", api="rerank", timeout=10.0)
    recorder = calls.stats_recorder()
    for starved in range(250):
        recorder.pool(5 if starved < 124 else 20, 5)
    report = status.snapshot(None, ({}, config, []))
    assert report["statistics"]["pool"]["starved_fraction"] == 0.5  # the shown figure, rounded
    assert not [hint for hint in report["hints"] if hint.startswith("Pools are starved")]
    recorder.pool(5, 5)  # 125 of 251: still under half
    recorder.pool(5, 5)  # 126 of 252: half
    assert [hint for hint in status.snapshot(None, ({}, config, []))["hints"] if hint.startswith("Pools are starved")]
