"""``demo``: with no setup, a recall before and after reranking through ``rerank_pool``; or a given server."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

from support.servers import serve_in_thread
from usr.plugins.a0_reranker.demo import MEMORIES, QUERY

from .conftest import cli_env

RELEASE_NOTES = next(m for m in MEMORIES if m.startswith("Release notes"))
CONNECTIVITY = next(m for m in MEMORIES if "lost the connection" in m)


def test_demo_runs_with_no_setup(cli) -> None:
    result = cli("demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert QUERY in out
    assert "embedded demo server http://127.0.0.1:" in out
    assert "not a neural model" in out
    assert "detected  Reranks correctly: infinity speaks rerank at /rerank" in out
    before, after = out.index("BEFORE"), out.index("AFTER")
    assert before < after
    first_after = out[after:].splitlines()[2]
    rank, _score, was = first_after.split()[:3]
    assert (rank, was) == ("1", "#8")
    assert RELEASE_NOTES[:40] in first_after
    assert CONNECTIVITY[:40] in out[before:after].splitlines()[2]


def test_demo_json_shows_the_relevant_memory_rising_to_the_top(cli) -> None:
    result = cli("demo", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reranker"]["embedded"] is True
    assert data["reranker"]["probe"]["api"] == "rerank"
    assert data["before"][0]["memory"] == CONNECTIVITY
    assert RELEASE_NOTES not in [b["memory"] for b in data["before"][: data["limit"]]]
    assert data["after"][0]["memory"] == RELEASE_NOTES
    assert data["after"][0]["was"] > data["limit"]
    assert len(data["after"]) == data["limit"] == data["kept"] == 5
    rescued = sum(1 for memory in data["after"] if memory["was"] > data["limit"])
    assert data["pool"] == {"recalls": 1, "mean_size": len(data["before"]), "starved_fraction": 0.0,
                            "rescued": rescued, "floor_dropped": 0}
    assert rescued >= 1


def test_a_limit_above_the_sample_says_the_recall_keeps_all_of_it(cli) -> None:
    """``--limit 100`` over the 10 sample memories keeps the 10: the text and the JSON say so, and claim no
    memory rescued, as none can be when the recall keeps the whole pool."""
    result = cli("demo", "--limit", "100")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert f"{len(MEMORIES)} sample memories; the recall keeps all {len(MEMORIES)} (--limit 100 is more" in out
    assert "keeps the best 100" not in out and "keeps the 100" not in out and "replaced" not in out
    assert f"the recall keeps all {len(MEMORIES)} memories, so reranking could only reorder them" in out
    data = json.loads(cli("demo", "--limit", "100", "--json").stdout)
    assert (data["limit"], data["kept"], len(data["after"])) == (100, len(MEMORIES), len(MEMORIES))
    assert data["pool"]["rescued"] == 0


def test_demo_with_an_endpoint_uses_that_server(cli, infinity) -> None:
    infinity.reset()
    result = cli("demo", "--endpoint", infinity.url, "--limit", "3", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reranker"] == {**data["reranker"], "endpoint": infinity.url, "embedded": False, "scorer": None}
    assert len(data["after"]) == 3
    assert infinity.count("/rerank") >= 2  # the probe and the recall


def test_demo_text_names_your_server(cli, infinity) -> None:
    result = cli("demo", "--endpoint", infinity.url)
    assert result.returncode == 0, result.stderr
    assert f"your server at {infinity.url}" in result.stdout


def test_demo_at_a_dead_server_is_one_line(cli, unused_port, one_error_line) -> None:
    result = cli("demo", "--endpoint", f"http://127.0.0.1:{unused_port}", "--timeout", "3")
    assert result.returncode == 1
    assert "not usable" in one_error_line(result)


def test_a_forced_api_that_ranks_wrongly_hints_at_the_option_to_type(cli, one_error_line) -> None:
    """The probe's hint names A0's setting (``rerank_api``); a terminal user types ``--api``."""
    with serve_in_thread("vllm_qwen3") as server:
        result = cli("demo", "--endpoint", server.url, "--api", "rerank")
    assert result.returncode == 1
    line = one_error_line(result)
    assert "Try --api auto." in line and "rerank_" not in line, line


# --- issue 23: a demo server that keeps running, for probe and rerank to point at -----------------------------


def test_demo_serve_keeps_a_server_that_probe_and_rerank_use(cli, start_cli) -> None:
    """After the demo a newcomer has a server to try the other commands on: ``demo --serve`` prints its
    URL and the commands to run, serves until Ctrl-C, and then stops with the documented code."""
    serving = start_cli("demo", "--serve")
    try:
        assert serving.stdout is not None
        first = serving.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", first)
        assert url is not None and "word overlap" in first, first
        shown = [serving.stdout.readline().strip() for _ in range(4)]
        assert f"a0-reranker probe {url.group()}" in shown, shown
        probe = cli("probe", url.group(), "--json")
        assert probe.returncode == 0, probe.stderr
        assert json.loads(probe.stdout)["api"] == "rerank"
        ranked = cli("rerank", "--endpoint", url.group(), "--json", QUERY, *MEMORIES)
        assert ranked.returncode == 0, ranked.stderr
        assert json.loads(ranked.stdout)["results"][0]["document"] == RELEASE_NOTES
        assert serving.poll() is None  # still serving after both
    finally:
        serving.send_signal(signal.SIGINT)
        _stdout, stderr = serving.communicate(timeout=60)
    assert serving.returncode == 130
    assert stderr.strip() == "a0-reranker demo: interrupted"


def test_demo_serve_refuses_an_endpoint(cli, one_error_line) -> None:
    result = cli("demo", "--serve", "--endpoint", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert "--serve runs the embedded demo server; it does not take --endpoint" in one_error_line(result)


def test_the_demo_servers_module_says_how_to_run_it(package_path) -> None:
    """``python -m a0_reranker.demo.server`` used to exit at once, silently."""
    result = subprocess.run([sys.executable, "-m", "a0_reranker.demo.server"], env=cli_env(package_path),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "a0-reranker demo --serve" in result.stderr


def test_options_the_mode_does_not_use_are_refused_not_ignored(cli, one_error_line) -> None:
    """``--serve --json`` printed plain text, and ``--port`` without ``--serve`` served on another port: each
    option that the chosen mode would silently ignore is a usage error (exit 2) that names it."""
    served = cli("demo", "--serve", "--json", "--limit", "3", "--timeout", "3", timeout=30)
    assert served.returncode == 2, served.stderr
    assert one_error_line(served).endswith("--serve runs the embedded demo server; it does not take --limit, "
                                           "--json, --timeout")
    one_off = cli("demo", "--port", "8000", timeout=30)
    assert one_off.returncode == 2, one_off.stderr
    assert "--port sets the port of demo --serve" in one_error_line(one_off)
