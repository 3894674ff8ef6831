"""The panel's live status dates what may be old (issue: stale figures): the last fallback says how long ago it
happened, and a server's latency is that of the recent window, "–" once it answered nothing in it, on the
counters' clock (a test's ``ManualClock`` here), as the status tool and the API have them."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from support.deadlines import ManualClock
from support.servers import serve_in_thread

from .conftest import A0Root, Panel
from .test_panel_replicas import cell, server_row
from .test_settings_panel import DOCUMENTS, expect, open_panel, rerank_a_few

pytestmark = pytest.mark.browser


SHORT_WINDOW_S = 120.0  # not the usual 5 minutes: the panel must say the window the counters use


def counters_on(a0_root: A0Root, **recorder: object) -> Iterator[ManualClock]:
    """The process's counters on the test's clock (the ``panel`` fixture stopped the runtime: the next rerank
    starts one that reports to them), made with ``recorder``'s arguments."""
    calls, statistics = a0_root.plugin("service.calls"), a0_root.plugin("core.statistics")
    manual = ManualClock()
    calls._STATS.discard()
    calls._STATS.get(lambda: statistics.StatsRecorder(clock=manual, **recorder))
    yield manual
    a0_root.plugin("service.runtime").shutdown()
    calls._STATS.discard()  # the next test gets the process's usual counters


@pytest.fixture
def stats_clock(panel: Panel, a0_root: A0Root) -> Iterator[ManualClock]:
    yield from counters_on(a0_root)


@pytest.fixture
def short_window_clock(panel: Panel, a0_root: A0Root) -> Iterator[ManualClock]:
    yield from counters_on(a0_root, window_s=SHORT_WINDOW_S)


def answers_then_a_fallback(a0_root: A0Root, url: str) -> None:
    """A few reranks answered by ``url``, then a fallback on a closed server; ``url`` becomes the saved endpoint."""
    rerank_a_few(a0_root, url)
    with serve_in_thread("infinity") as gone:
        dead = gone.url
    a0_root.plugin("helpers.reranker").rerank("q", DOCUMENTS, config={"rerank_endpoint": dead, "rerank_timeout": 2})
    a0_root.save_global_config({"rerank_endpoint": url})


def test_the_last_fallback_is_dated_and_a_quiet_servers_latency_is_none(
        panel: Panel, a0_root: A0Root, stats_clock: ManualClock) -> None:
    window_min = int(a0_root.plugin("core.statistics").LATENCY_WINDOW_S // 60)
    with serve_in_thread("infinity") as server:
        answers_then_a_fallback(a0_root, server.url)
        stats_clock.now += 180
        panel.page.clock.install()  # the page's timers, so the refresh can be stepped
        open_panel(panel)
        last_error = panel.page.locator('[data-status="last-error"]')
        expect(last_error).to_contain_text("Last fallback (3 min ago): ")
        row = server_row(panel, server.url)
        assert re.fullmatch(r"[\d.,]+ ms", cell(row, "latency")) and re.fullmatch(r"[\d.,]+ ms", cell(row, "per-pair"))
        stats_clock.now += window_min * 60  # a quiet spell: the server answered nothing in the window
        panel.page.clock.fast_forward(3_500)
        expect(last_error).to_contain_text(f"Last fallback ({3 + window_min} min ago): ")
    expect(row.locator('[data-col="latency"]')).to_have_text("–")
    expect(row.locator('[data-col="per-pair"]')).to_have_text("–")
    assert re.fullmatch(r"\d+% \(\d+\)", cell(row, "share"))  # its totals stay


def test_the_panel_says_the_window_and_the_age_the_status_reports(
        panel: Panel, a0_root: A0Root, short_window_clock: ManualClock) -> None:
    """The window and the error's age are the status's, not rules of the panel's own: a window of 2 minutes is
    named so and empties the latencies after 2 minutes, and the age is the status's words."""
    with serve_in_thread("infinity") as server:
        answers_then_a_fallback(a0_root, server.url)
        panel.page.clock.install()
        open_panel(panel)
        latency = panel.stat("latency")
        expect(latency.locator(".a0r-tile-note")).to_have_text("per rerank, last 2 minutes")
        expect(panel.page.locator(".a0r-servers-note")).to_contain_text("Latency: the mean of the last 2 minutes (")
        row = server_row(panel, server.url)
        assert re.fullmatch(r"[\d.,]+ ms", cell(row, "latency"))
        short_window_clock.now += SHORT_WINDOW_S + 1  # past this window, well inside the usual 5 minutes
        panel.page.clock.fast_forward(3_500)
        expect(row.locator('[data-col="latency"]')).to_have_text("–")
        expect(latency.locator(".a0r-tile-value")).to_have_text("– / –")
    stats = panel.host.plugin_calls("status")[-1].json()["statistics"]
    assert (stats["latency_window_s"], stats["last_error_age"]) == (SHORT_WINDOW_S, "2 min ago"), stats
    expect(panel.page.locator('[data-status="last-error"]')).to_contain_text("Last fallback (2 min ago): ")
