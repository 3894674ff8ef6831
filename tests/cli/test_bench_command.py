"""``bench``: the batching benchmark with a progress bar, its table, bench.json and bench.png."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
from pathlib import Path

import pytest

from support.processes import children_of, ended, parent_of

from .conftest import BENCH_MODULE, BENCH_PROG

SMALL = ("--quick", "--concurrency", "1,4", "--documents", "4", "--recalls", "8")


def test_quick_bench_writes_json_and_plot(bench_cli, tmp_path) -> None:
    out = tmp_path / "results"
    result = bench_cli(*SMALL, "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "100%" in result.stderr and "batched at concurrency 4" in result.stderr  # the progress bar
    assert "speed-up" in result.stdout.splitlines()[0]
    document = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert document["server"] == "cost-model"
    assert document["documents"] == 4
    assert [row["concurrency"] for row in document["rows"]] == [1, 4]
    assert {level["mode"] for level in document["levels"]} == {"naive", "batched"}
    assert all(level["recalls"] == 8 for level in document["levels"])
    assert document["rows"][0]["naive_requests"] == 8  # naive: one HTTP request per recall
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "bench.png").read_bytes().startswith(b"\x89PNG")
        assert f"wrote {out / 'bench.png'}" in result.stdout


def test_without_matplotlib_it_says_how_to_install_and_still_writes_json(bench_cli, tmp_path) -> None:
    blocker = tmp_path / "no_matplotlib"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked for this test')\n")
    out = tmp_path / "results"
    result = bench_cli(*SMALL, "--concurrency", "2", "--out", str(out), path=(blocker,))
    assert result.returncode == 0, result.stderr
    assert "pip install -e '.[bench]'" in result.stdout
    assert (out / "bench.json").is_file()
    assert not (out / "bench.png").exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--concurrency", "1,x"], "--concurrency"),
    (["--concurrency", "0"], "at least 1"),
    (["--documents", "-3"], "--documents"),
    (["--recalls", "1"], "--recalls"),
])
def test_bad_numbers_are_one_line_and_exit_2(bench_cli, one_error_line, args, needle) -> None:
    result = bench_cli(*args)
    assert result.returncode == 2
    assert needle in one_error_line(result)


def test_an_output_folder_that_cannot_be_created_is_one_line(bench_cli, one_error_line, tmp_path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    result = bench_cli(*SMALL, "--out", str(blocker / "results"))
    assert result.returncode == 2
    assert "--out" in one_error_line(result)


def test_an_unreachable_endpoint_is_one_line(bench_cli, unused_port, one_error_line) -> None:
    result = bench_cli("--endpoint", f"http://127.0.0.1:{unused_port}", *SMALL)
    assert result.returncode == 1
    assert "vLLM's /score" in one_error_line(result)


def test_a_vllm_score_endpoint_is_benchmarked(bench_cli, tmp_path) -> None:
    from support.servers import serve_in_thread

    with serve_in_thread("vllm_qwen3") as server:
        result = bench_cli("--endpoint", server.url, *SMALL, "--concurrency", "2", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    assert document["server"] == "endpoint" and document["cost_model"] is None
    assert "n/a" in result.stdout  # a real server has no /stats request counter


# --- issue 15: SIGTERM (timeout, docker stop, systemd) ends the benchmark and everything it started ----------


@pytest.mark.skipif(not hasattr(os, "pidfd_open") or not Path("/proc/self/stat").exists(),
                    reason="watches the child processes through /proc and pidfds (Linux)")
def test_sigterm_during_bench_ends_its_server_and_the_resource_tracker(start_cli, tmp_path) -> None:
    bench = start_cli("--concurrency", "1", "--documents", "4", "--recalls", "1000000", "--out", str(tmp_path),
                      module=BENCH_MODULE)
    pidfds: list[int] = []
    try:
        assert bench.stderr is not None
        first = bench.stderr.readline()  # the progress bar's first step: the server is up, recalls run
        assert "naive at concurrency 1" in first, first
        started = children_of(bench.pid)
        pidfds = [os.pidfd_open(pid) for pid in started]
        assert len(started) >= 2, started  # the cost-model server and multiprocessing's resource tracker
        bench.send_signal(signal.SIGTERM)
        stdout, stderr = bench.communicate(timeout=60)  # returns once no process holds its pipes open
        assert ended(pidfds, within_s=30), [pid for pid in started if parent_of(pid) is not None]
    finally:  # on a failure, leave nothing behind either (a pidfd names exactly that process, never a reused id)
        for fd in pidfds:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
    assert bench.returncode == 143, stderr
    assert stderr.splitlines()[-1] == f"{BENCH_PROG}: terminated", stderr
    assert "Traceback" not in stderr and "leaked" not in stderr, stderr
    assert stdout == ""
