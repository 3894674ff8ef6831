"""Ranking math, input cuts, shadow-mode order change, and the statistics recorder."""

from __future__ import annotations

import threading

from usr.plugins.a0_reranker.core.redaction import redact
from usr.plugins.a0_reranker.core.scores import cut_head, order_change, ranked, tighter_limits
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


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
