"""``probe``: the Test connection report from a terminal; exit 0 only when the server ranks correctly."""

from __future__ import annotations

import json

import pytest
from reliability.hostile_servers import HOSTILE_SERVERS, ReflectAuthorizationIntoModels, on_listings

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


def test_probe_at_a_dead_port_is_one_line(cli, unused_port, one_error_line) -> None:
    result = cli("probe", f"http://127.0.0.1:{unused_port}", "--timeout", "3")
    assert result.returncode == 1
    assert "cannot connect" in one_error_line(result)


def test_probe_json_at_a_dead_port_still_parses(cli, unused_port) -> None:
    result = cli("probe", f"http://127.0.0.1:{unused_port}", "--json", "--timeout", "3")
    assert result.returncode == 1
    assert json.loads(result.stdout)["ok"] is False


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
