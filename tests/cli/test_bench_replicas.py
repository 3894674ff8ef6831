"""``bench --replicas N``: its own cost-model servers, one table row per set, replicas.json."""

from __future__ import annotations

import json

import pytest

SMALL = ("--quick", "--recalls", "8", "--documents", "4", "--concurrency", "4")


def test_two_replicas_and_a_skewed_pair_are_measured_and_written(bench_cli, tmp_path) -> None:
    out = tmp_path / "results"
    result = bench_cli("--replicas", "2", *SMALL, "--out", str(out), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "round 1: 2 replicas, one 4x slower" in result.stderr  # the progress bar
    assert "share of pairs (GPU busy) per replica" in result.stdout
    assert "the slow one got" in result.stdout
    document = json.loads((out / "replicas.json").read_text(encoding="utf-8"))
    assert document["server"] == "cost-model replicas" and document["concurrency"] == 4
    assert [row["set"] for row in document["rows"]] == ["1 replica", "2 replicas", "2 replicas, one 4x slower"]
    assert document["rows"][0]["ratio_to_one"] == 1.0
    assert document["goal"]["measured"] is None  # 3 replicas were not measured
    for row in document["rows"]:
        assert len(row["shares"]) == row["replicas"] and sum(row["shares"]) == pytest.approx(1.0, abs=0.01)
        assert all(0.0 <= busy <= 1.0 for busy in row["gpu_busy"])
    assert document["rows"][2]["slowdowns"] == [1.0, 4.0]
    assert all(run["recalls"] == 8 for run in document["runs"])


@pytest.mark.parametrize(("args", "needle"), [
    (["--replicas", "0"], "--replicas"),
    (["--replicas", "9"], "from 1 to 8"),
    (["--replicas", "2", "--endpoint", "http://127.0.0.1:9"], "does not take --endpoint"),
    (["--replicas", "2", "--concurrency", "4,8"], "one concurrency"),
    (["--replicas", "2", "--cost-scale", "0"], "--cost-scale"),
])
def test_bad_replica_options_are_one_line_and_exit_2(bench_cli, one_error_line, args, needle) -> None:
    result = bench_cli(*args)
    assert result.returncode == 2
    assert needle in one_error_line(result)
