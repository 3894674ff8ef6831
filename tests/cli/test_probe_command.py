"""``probe``: the Test connection report from a terminal; exit 0 only when the server ranks correctly."""

from __future__ import annotations

import json
import re

import pytest
from reliability.hostile_servers import (
    HOSTILE_SERVERS,
    SSH_BANNER,
    ReflectAuthorizationIntoModels,
    on_listings,
    other_service,
)

from support.servers import serve_in_thread

# kind, server options, what the report must name
KINDS = [
    ("infinity", {}, "infinity speaks rerank at /rerank"),
    ("tei", {}, "tei speaks rerank at /rerank"),
    ("vllm_qwen3", {}, "vllm speaks qwen3_score at /score"),
    ("llamacpp", {}, "llamacpp speaks rerank at /v1/rerank"),
]


@pytest.mark.parametrize(("kind", "options", "detected"), KINDS, ids=[k[0] for k in KINDS])
def test_probe_reports_the_detected_api(cli, kind, options, detected) -> None:
    with serve_in_thread(kind, **options) as server:
        result = cli("probe", server.url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK")
    assert detected in result.stdout
    for field in ("latency", "relevant", "irrelevant", "margin"):
        assert f"  {field}" in result.stdout


def test_probe_json_parses(cli) -> None:
    with serve_in_thread("vllm_qwen3") as server:
        result = cli("probe", server.url, "--json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert (report["api"], report["path"], report["server"]) == ("qwen3_score", "/score", "vllm")
    assert report["url"] == server.url + "/score"
    assert report["margin"] > 0.05
    assert "note" not in report


def test_a_server_that_ranks_wrongly_fails_with_its_report(cli) -> None:
    """vLLM /rerank without the Qwen3 template answers, but ranks wrongly: exit 1, the report says why."""
    with serve_in_thread("vllm_qwen3") as server:
        result = cli("probe", server.url, "--api", "rerank")
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL")
    assert "ranks wrongly" in result.stdout


def test_a_forced_api_that_ranks_wrongly_hints_at_the_option_to_type(cli, unused_port) -> None:
    """The hint names ``--api auto``, what a CLI user types, not the A0 setting, in text, JSON and replicas."""
    with serve_in_thread("vllm_qwen3") as server:
        text = cli("probe", server.url, "--api", "rerank")
        data = cli("probe", server.url, "--api", "rerank", "--json")
        replicas = cli("probe", f"{server.url},http://127.0.0.1:{unused_port}", "--api", "rerank", "--timeout", "5")
    assert "Try --api auto." in text.stdout.splitlines()[0], text.stdout
    assert json.loads(data.stdout)["message"].endswith("Try --api auto.")
    assert "Try --api auto." in replicas.stdout.splitlines()[1], replicas.stdout
    for result in (text, data, replicas):
        assert result.returncode == 1 and "rerank_api" not in result.stdout + result.stderr


def test_probe_at_a_dead_port_is_one_line(cli, unused_port, one_error_line) -> None:
    result = cli("probe", f"http://127.0.0.1:{unused_port}", "--timeout", "3")
    assert result.returncode == 1
    assert "cannot connect" in one_error_line(result)


def test_probe_json_at_a_dead_port_still_parses(cli, unused_port) -> None:
    result = cli("probe", f"http://127.0.0.1:{unused_port}", "--json", "--timeout", "3")
    assert result.returncode == 1
    assert json.loads(result.stdout)["ok"] is False


def test_probe_at_a_port_that_runs_another_service_says_it_does_not_speak_http(cli, one_error_line) -> None:
    """The user typed the port of another service (here SSH): the report says so, not "cannot connect"."""
    with other_service(greeting=SSH_BANNER) as service:
        result = cli("probe", service.url, "--timeout", "5")
    assert result.returncode == 1
    line = one_error_line(result)
    assert f"{service.url} does not speak HTTP" in line and "SSH-2.0-OpenSSH_9.6" in line, line


@pytest.mark.parametrize(("args", "needle"), [
    (["probe", "localhost:8000"], "must start with http:// or https://"),
    (["probe", "http://127.0.0.1:1", "--timeout", "abc"], "invalid float value"),
    (["probe", "http://127.0.0.1:1", "--timeout", "0"], "--timeout: must be between"),
    (["probe", "http://127.0.0.1:1", "--api", "cohere"], "invalid choice"),
    (["probe"], "required"),
    (["nonsense"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(cli, args, needle, one_error_line) -> None:
    result = cli(*args)
    assert result.returncode == 2
    assert needle in one_error_line(result)


def test_the_key_comes_from_the_named_variable_and_is_never_printed(cli, one_error_line) -> None:
    secret = "sk-test-5f2a9c"
    with serve_in_thread("infinity", api_key=secret) as server:
        without = cli("probe", server.url)
        missing = cli("probe", server.url, "--key-env", "A0_TEST_KEY")
        keyed = cli("probe", server.url, "--key-env", "A0_TEST_KEY", "--json", env={"A0_TEST_KEY": secret})
    assert without.returncode == 1
    assert missing.returncode == 2
    assert "A0_TEST_KEY" in one_error_line(missing)
    assert keyed.returncode == 0, keyed.stdout
    for result in (without, missing, keyed):
        assert secret not in result.stdout + result.stderr


# --- issue 15: hostile servers and odd settings ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HOSTILE_SERVERS))
def test_a_hostile_server_is_one_line_and_exit_1(cli, one_error_line, name: str) -> None:
    kind, rule = HOSTILE_SERVERS[name]
    with serve_in_thread(kind) as server:
        server.set_fault(rule)
        result = cli("probe", server.url)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Not working: no reranker API answered" in one_error_line(result)


@pytest.mark.parametrize("url", ["http://[::1", "http://[127.0.0.1]:80", "http://ex℀ample.com", "http://u:hunter2@[::1"])
def test_a_url_that_cannot_be_read_is_one_line_and_exit_2(cli, one_error_line, url: str) -> None:
    result = cli("probe", url)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert "the URL has a malformed host" in line and "hunter2" not in line


def test_a_key_with_a_line_break_is_one_line_naming_the_option_and_never_printed(cli, one_error_line) -> None:
    result = cli("probe", "http://127.0.0.1:1", "--key-env", "A0_TEST_KEY", env={"A0_TEST_KEY": "sk-first\nsk-second"})
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.endswith("--key-env: must not contain a line break or other control character")
    assert "sk-first" not in line and "sk-second" not in line


def test_a_key_reflected_into_the_model_ids_is_never_printed(cli) -> None:
    secret = "sk-test-5f2a9c-reflected"
    with serve_in_thread("llamacpp", api_key=secret) as server:
        server.set_fault(on_listings(ReflectAuthorizationIntoModels()))
        shown = [cli("probe", server.url, "--key-env", "A0_TEST_KEY", *more, env={"A0_TEST_KEY": secret})
                 for more in ((), ("--json",))]
    for result in shown:
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Bearer *** (reflected)" in result.stdout
        assert secret not in result.stdout + result.stderr and secret[:12] not in result.stdout + result.stderr


# --- issue 11: several replicas ------------------------------------------------------------------------------


def test_probe_of_replicas_prints_one_line_each_and_fails_while_one_is_down(cli, unused_port) -> None:
    dead = f"http://127.0.0.1:{unused_port}"
    with serve_in_thread("infinity") as first, serve_in_thread("vllm_qwen3") as second:
        result = cli("probe", first.url, f"{second.url}, {dead}", "--timeout", "5")
        both = cli("probe", f"{first.url},{second.url}", "--json")
    assert result.returncode == 1, result.stderr
    summary, *rows = result.stdout.splitlines()
    assert summary == f"FAIL  2 of 3 replicas rank correctly; failing: replica 3 {dead} (not working). " \
                      "Fix or remove the failing ones."
    assert len(rows) == 3
    assert rows[0].split()[:5] == ["1", "OK", first.url, "rerank", "at"] and "/rerank" in rows[0]
    assert rows[1].split()[:5] == ["2", "OK", second.url, "qwen3_score", "at"] and "/score" in rows[1]
    for row in rows[:2]:
        assert re.search(r"latency [\d.]+ ms  margin \+0\.\d{3}", row), row
    assert rows[2].split()[:3] == ["3", "FAIL", dead] and "cannot connect" in rows[2]

    assert both.returncode == 0, both.stdout + both.stderr
    report = json.loads(both.stdout)
    assert report["ok"] is True and report["message"].startswith("All 2 replicas rank correctly (smallest margin +")
    assert report["endpoint"] == f"{first.url}, {second.url}" and "note" not in report
    assert [(r["endpoint"], r["api"], r["path"], r["ok"]) for r in report["replicas"]] == [
        (first.url, "rerank", "/rerank", True), (second.url, "qwen3_score", "/score", True)]
    assert all(r["margin"] > 0 and r["latency_ms"] > 0 and "note" not in r for r in report["replicas"])
    assert report["margin"] == min(r["margin"] for r in report["replicas"])


def test_a_bad_replica_is_named_by_position_and_exit_2(cli, one_error_line) -> None:
    result = cli("probe", "http://127.0.0.1:1", "localhost:8000")
    assert result.returncode == 2
    assert "entry 2 of 2 must start with http:// or https://" in one_error_line(result)
