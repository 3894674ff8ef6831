"""``bench --overload`` and ``bench --burst``: their own cost-model servers, a table, a JSON document.

The figures themselves are judged by the benchmark's goals on a quiet machine (docs/overload.md); here
the commands run short and what they print and write is checked for its shape and its sense."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import cli_env

SHORT_OVERLOAD = ("--overload", "--loads", "2", "--timeouts", "1.5", "--seeds", "4", "--seconds", "3")


def test_overload_runs_shedding_on_and_off_side_by_side_and_writes_them(bench_cli, tmp_path) -> None:
    out = tmp_path / "results"
    result = bench_cli(*SHORT_OVERLOAD, "--out", str(out), timeout=180)
    assert result.returncode == 0, result.stderr
    assert "25 recalls/s capacity" in result.stdout
    assert "shedding on:" in result.stdout and "shedding off:" in result.stdout
    document = json.loads((out / "overload.json").read_text(encoding="utf-8"))
    runs = document["runs"]
    assert [run["shedding"] for run in runs] == [True, False]
    assert all(run["load"] == 2.0 and run["timeout"] == 1.5 and run["offered"] > 0 for run in runs)
    shedding = runs[0]
    assert not shedding["breaker_opened"] and not shedding["problems"] and shedding["late"] == 0
    assert shedding["outcomes"].get("overload", 0) > 0  # twice the capacity: some were shed
    assert shedding["recovery_reranked"] == shedding["recovery_recalls"] == 50


def test_mixed_timeouts_prints_each_agents_share_reranked_and_the_capacity_used(package_path: Path) -> None:
    command = [sys.executable, "-m", "a0_reranker.bench.mixed_timeouts", "--seconds", "3", "--own-batchers"]
    result = subprocess.run(command, env=cli_env(package_path), capture_output=True, text=True, timeout=180,
                            check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("two agents, 0.75x capacity each (1.5x together), own batchers"), result.stdout
    assert lines[1].startswith("short-timeout agent (1 s): ") and lines[2].startswith("long-timeout agent (5 s): ")
    assert all("recalls reranked" in line and "late 0, problems 0" in line for line in lines[1:3]), result.stdout
    assert lines[3].startswith("capacity used: ") and "'closed'" in lines[3], result.stdout


def test_burst_measures_one_replica_against_several(bench_cli, tmp_path) -> None:
    out = tmp_path / "results"
    result = bench_cli("--burst", "--replicas", "2", "--quick", "--out", str(out), timeout=180)
    assert result.returncode == 0, result.stderr
    assert "2 replicas:" in result.stdout and "x sooner" in result.stdout
    document = json.loads((out / "burst.json").read_text(encoding="utf-8"))
    assert document["replicas"] == 2 and document["ratio"] > 1.0
    assert all(run["fallbacks"] == 0 for run in document["runs"])


@pytest.mark.parametrize(("args", "needle"), [
    (["--overload", "--burst"], "one at a time"),
    (["--overload", "--endpoint", "http://127.0.0.1:9"], "does not take --endpoint"),
    (["--overload", "--seconds", "1"], "--seconds"),
    (["--overload", "--loads", "0,2"], "above 0"),
    (["--overload", "--loads", "2,2"], "repeated"),
    (["--burst", "--replicas", "1"], "from 2 to 8"),
])
def test_bad_overload_options_are_one_line_and_exit_2(bench_cli, one_error_line, args, needle) -> None:
    result = bench_cli(*args)
    assert result.returncode == 2
    assert needle in one_error_line(result)
