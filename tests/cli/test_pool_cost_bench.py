"""``bench/recall_pool_cost.py`` runs from a checkout and reports every variant side by side (its
figures are in docs/recall.md; here only that it measures what it says, on both memory APIs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("api", ["newer", "v1.7"])
def test_the_pool_cost_bench_reports_every_variant(package_path: Path, tmp_path: Path, api: str) -> None:
    out = tmp_path / "cost.json"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}, "PYTHONPATH": str(package_path)}
    done = subprocess.run(
        [sys.executable, "-m", "a0_reranker.bench.recall_pool_cost", "--memories", "60", "--recalls", "8",
         "--memory-api", api, "--json", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    variants = [result["variant"] for result in report["results"]]
    expected = ["stock", "plugin", "plugin_without_pool"] + (["one_scored_search"] if api == "newer" else [])
    assert variants == expected and all(result["recalls"] == 8 for result in report["results"])
    assert report["results"][0]["ratio_to_stock"] == 1.0 and report["memory_api"] == api
    assert report["mean_pool_size"] >= 1 and "the pool search itself" in done.stdout
