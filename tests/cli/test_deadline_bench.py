"""``bench/deadline_release.py`` measures what the deadline tests only bound loosely (tests/support/deadlines.py).
Here only that it measures what it says: every caller of a held server gets None, never before its deadline;
the skipped calls send nothing; its figures (a loaded machine may miss the goals) match its exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.deadlines import EARLY_S


def test_the_deadline_bench_reports_lateness_and_the_breakers_cost(package_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "release.json"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}, "PYTHONPATH": str(package_path)}
    done = subprocess.run(
        [sys.executable, "-m", "a0_reranker.bench.deadline_release", "--callers", "8", "--rounds", "2",
         "--calls", "20", "--json", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["not_none"] == 0 and report["skipped_sent"] == 0
    for side in ("async_lateness", "blocking_lateness"):
        assert report[side]["samples"] == 16 and report[side]["min_ms"] >= -EARLY_S * 1000, report
    assert report["skipped_call"]["samples"] == report["answered_call"]["samples"] == 20
    assert report["skipped_to_answered"] > 0 and done.returncode == (0 if report["goals_met"] else 1)
    assert "lateness after the deadline" in done.stdout
