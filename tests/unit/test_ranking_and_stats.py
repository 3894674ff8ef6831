"""Ranking math, input cuts, shadow-mode order change, and the statistics recorder."""

from __future__ import annotations

import threading

import pytest

from usr.plugins.a0_reranker.core.redaction import redact
from usr.plugins.a0_reranker.core.scores import cut_head, order_change, ranked, tighter_limits
from usr.plugins.a0_reranker.core.statistics import (
    LATENCY_WINDOW,
    LATENCY_WINDOW_S,
    SERVERS_KEPT,
    ReplicaStatistics,
    StatsRecorder,
)


def test_ranked_is_best_first_and_stable() -> None:
    assert ranked([0.1, 0.9, 0.5, 0.9]) == [(1, 0.9), (3, 0.9), (2, 0.5), (0, 0.1)]
    assert ranked([]) == []


def test_cuts_keep_the_head() -> None:
    assert cut_head("user message\n\nhistory", 12) == "user message"
    assert cut_head("short", 100) == "short"
    assert tighter_limits(1000, 8000) == (500, 1200)
    assert tighter_limits(100, 200) == (100, 200)


def test_order_change_counts_kept_and_displacement() -> None:
    unchanged = order_change([0, 1, 2, 3, 4, 5], limit=3)
    assert (unchanged.kept, unchanged.mean_displacement) == (3, 0.0)
    rescued = order_change([7, 0, 1, 2], limit=3)
    assert (rescued.limit, rescued.kept, rescued.replaced) == (3, 2, 1)
    assert rescued.mean_displacement == (7 + 1 + 1) / 3


def test_redact_masks_every_occurrence() -> None:
    assert redact("Bearer sk-abc123 rejected sk-abc123", "sk-abc123") == "Bearer *** rejected ***"
    assert redact("nothing", "") == "nothing"


def test_statistics_snapshot_and_percentiles_under_threads() -> None:
    recorder = StatsRecorder()

    def work() -> None:
        for i in range(100):
            recorder.rerank_started()
            recorder.reranked((i + 1) / 1000, "rerank")
            recorder.on_request(4)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recorder.fell_back("timeout", "slow")
    recorder.shadow(0.6, 1.5)
    snap = recorder.snapshot(breakers={"http://h": "open"}, queued_pairs=3)
    assert (snap.reranks, snap.reranked, snap.http_requests, snap.pairs_scored) == (400, 400, 400, 1600)
    assert snap.mean_pairs_per_request == 4
    assert snap.latency_p50_ms == 50.0 and snap.latency_p95_ms == 95.0
    assert dict(snap.fallbacks) == {"timeout": 1} and snap.last_error == "slow"
    data = snap.as_dict()
    assert data["breakers"] == {"http://h": "open"} and data["shadow_recalls"] == 1
    recorder.reset()
    assert recorder.snapshot().reranks == 0


def test_percentiles_are_of_the_recent_window_only() -> None:
    """A slow spell, then, past the window, a fast one: the percentiles are the fast one's alone; a quiet
    window has none. The samples kept stay bounded however many come."""
    clock = [100.0]
    recorder = StatsRecorder(clock=lambda: clock[0])
    for _ in range(3 * LATENCY_WINDOW):
        recorder.reranked(0.5, "rerank")
        recorder.on_queue_wait(0.2)
    clock[0] += LATENCY_WINDOW_S - 1
    slow = recorder.snapshot()
    assert (slow.latency_p50_ms, slow.load.queue_wait_p95_ms) == (500.0, 200.0)  # still in the window
    clock[0] += 2
    recorder.reranked(0.01, "rerank")
    recorder.on_queue_wait(0.001)
    fast = recorder.snapshot()
    assert (fast.latency_p50_ms, fast.latency_p95_ms) == (10.0, 10.0)
    assert (fast.load.queue_wait_p50_ms, fast.load.queue_wait_p95_ms) == (1.0, 1.0)
    clock[0] += LATENCY_WINDOW_S
    quiet = recorder.snapshot()
    assert (quiet.latency_p50_ms, quiet.latency_p95_ms, quiet.load.queue_wait_p50_ms) == (None, None, None)
    assert quiet.reranked == 3 * LATENCY_WINDOW + 1
    assert len(recorder._latencies) <= LATENCY_WINDOW and len(recorder._queue_waits) <= LATENCY_WINDOW


def server_rows(recorder: StatsRecorder, *urls: str) -> dict[str, tuple[float | None, float | None]]:
    """Each server's (latency_ms, ms_per_pair) in a snapshot that lists ``urls``, as the registry lists them."""
    rows = tuple(ReplicaStatistics(url=url, breaker="closed", pairs=0, share=0.0, in_flight=0) for url in urls)
    return {row.url: (row.latency_ms, row.ms_per_pair) for row in recorder.snapshot(replicas=rows).replicas}


def test_a_quiet_servers_row_keeps_its_answer_however_busy_another_is() -> None:
    """One shared list of the last answers let a busy replica push a quiet one's answer of a minute ago out:
    its row said "no answer" while the answer was inside the window. Each server's answers are its own."""
    clock = [100.0]
    recorder = StatsRecorder(clock=lambda: clock[0])
    recorder.on_answer("http://quiet", 0.2, 4)
    clock[0] += 60
    for _ in range(LATENCY_WINDOW + 1):
        recorder.on_answer("http://busy", 0.01, 10)
    rows = server_rows(recorder, "http://quiet", "http://busy")
    assert rows["http://quiet"] == pytest.approx((200.0, 50.0)), rows
    assert rows["http://busy"] == pytest.approx((10.0, 1.0)), rows


def test_a_quiet_servers_figures_still_age_out_of_the_window() -> None:
    """Kept apart, a quiet server's answer still counts for the window alone: past it, its row has no figure
    while a busy one, answering still, keeps its own; and the servers kept stay bounded however many answer."""
    clock = [100.0]
    recorder = StatsRecorder(clock=lambda: clock[0])
    recorder.on_answer("http://quiet", 0.2, 4)
    clock[0] += LATENCY_WINDOW_S - 1
    assert server_rows(recorder, "http://quiet")["http://quiet"] == pytest.approx((200.0, 50.0))  # still in the window
    clock[0] += 2
    recorder.on_answer("http://busy", 0.01, 10)
    rows = server_rows(recorder, "http://quiet", "http://busy")
    assert rows["http://quiet"] == (None, None) and rows["http://busy"] == pytest.approx((10.0, 1.0)), rows
    for n in range(10 * SERVERS_KEPT):
        recorder.on_answer(f"http://replica-{n}", 0.01, 1)
        recorder.on_answer("http://busy", 0.01, 10)
    assert server_rows(recorder, "http://busy")["http://busy"] == pytest.approx((10.0, 1.0))  # answering: kept
    assert server_rows(recorder, "http://replica-0")["http://replica-0"] == (None, None)  # long since crowded out
    assert len(recorder._answers) <= SERVERS_KEPT  # servers kept
