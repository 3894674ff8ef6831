"""``rerank``: documents from arguments, a file, stdin or JSON Lines; a table or ``--json``; one-line errors."""

from __future__ import annotations

import json

import pytest

from support.servers import serve_in_thread

QUERY = "What is the capital of France?"
DOCS = ["Bananas are rich in potassium.", "Paris is the capital of France.", "France borders Spain and Italy."]


def ranked_indices(stdout: str) -> list[int]:
    return [item["index"] for item in json.loads(stdout)["results"]]


def test_documents_from_arguments_print_a_ranking_table(cli, infinity) -> None:
    result = cli("rerank", "--endpoint", infinity.url, QUERY, *DOCS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "3 documents ranked by" in lines[0]
    assert lines[1].split() == ["rank", "score", "index", "document"]
    assert lines[2].split()[0] == "1" and lines[2].split()[2] == "1"
    assert lines[2].endswith("Paris is the capital of France.")


def test_json_output(cli, infinity) -> None:
    result = cli("rerank", "--endpoint", infinity.url, "--json", QUERY, *DOCS)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["api"] == "rerank"
    assert ranked_indices(result.stdout)[0] == 1
    scores = [item["score"] for item in data["results"]]
    assert scores == sorted(scores, reverse=True)
    assert [item["rank"] for item in data["results"]] == [1, 2, 3]
    assert data["results"][0]["document"] == DOCS[1]
    counters = data["statistics"]
    assert data["retries"] == 0 and counters["reranked"] == 1
    assert {"retries", "stale_connection_retries", "rate_limit_waits", "hedges", "retry_budget_exhausted",
            "cancelled"} <= counters.keys()


def test_json_statistics_show_each_replica(cli) -> None:
    with serve_in_thread("infinity") as first, serve_in_thread("tei") as second:
        result = cli("rerank", "--endpoint", f"{first.url}, {second.url}", "--json", QUERY, *DOCS)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["endpoint"] == f"{first.url}, {second.url}" and ranked_indices(result.stdout)[0] == 1
    replicas = {r["url"]: r for r in data["statistics"]["replicas"]}
    assert set(replicas) == {first.url, second.url}
    assert sum(r["pairs"] for r in replicas.values()) == len(DOCS)
    assert sum(r["share"] for r in replicas.values()) == pytest.approx(1.0)
    for replica in replicas.values():
        assert replica["breaker"] == "closed" and replica["in_flight"] == 0
        assert replica["latency_ms"] is None or replica["pairs"] > 0  # a hedge's loser may have no latency
    assert any(r["latency_ms"] for r in replicas.values())


def test_top_limits_the_output(cli, infinity) -> None:
    result = cli("rerank", "--endpoint", infinity.url, "--json", "--top", "1", QUERY, *DOCS)
    assert ranked_indices(result.stdout) == [1]


def test_documents_from_a_file_one_per_line(cli, infinity, tmp_path) -> None:
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(DOCS) + "\n\n", encoding="utf-8")
    result = cli("rerank", "--endpoint", infinity.url, "--file", str(path), "--json", QUERY)
    assert result.returncode == 0, result.stderr
    assert sorted(ranked_indices(result.stdout)) == [0, 1, 2]
    assert ranked_indices(result.stdout)[0] == 1


def test_documents_from_stdin_as_json_lines(cli, infinity) -> None:
    lines = [json.dumps(DOCS[0]), json.dumps({"text": DOCS[1], "id": 7}), json.dumps({"text": DOCS[2]})]
    result = cli("rerank", "--endpoint", infinity.url, "--file", "-", "--json", QUERY, input="\n".join(lines))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["results"][0] == {**data["results"][0], "index": 1, "document": DOCS[1]}


def test_arguments_come_before_file_documents(cli, infinity) -> None:
    result = cli("rerank", "--endpoint", infinity.url, "--file", "-", "--json", QUERY, DOCS[0], input=DOCS[1] + "\n")
    assert ranked_indices(result.stdout) == [1, 0]


@pytest.mark.parametrize(("args", "stdin", "needle"), [
    (["--file", "/nonexistent/docs.txt", QUERY], None, "cannot read /nonexistent/docs.txt"),
    (["--file", "-", "--format", "jsonl", QUERY], '"ok"\n{"title": "no text"}\n',
     'stdin line 2: expected a JSON string or an object with a "text"'),
    (["--file", "-", "--format", "jsonl", QUERY], "not json\n", "stdin line 1: not valid JSON"),
    ([QUERY], None, "no documents to rank"),
    (["--top", "0", QUERY, "doc"], None, "--top"),
])
def test_bad_input_is_one_line_and_exit_2(cli, infinity, one_error_line, args, stdin, needle) -> None:
    result = cli("rerank", "--endpoint", infinity.url, *args, input=stdin)
    assert result.returncode == 2
    assert needle in one_error_line(result)


def test_an_unreadable_file_is_one_line(cli, infinity, one_error_line, tmp_path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\xe9\n".encode("latin-1"))
    result = cli("rerank", "--endpoint", infinity.url, "--file", str(path), QUERY)
    assert result.returncode == 2
    assert "not UTF-8" in one_error_line(result)


def test_a_bad_url_is_one_line(cli, one_error_line) -> None:
    result = cli("rerank", "--endpoint", "ftp://example.org", QUERY, *DOCS)
    assert result.returncode == 2
    assert "endpoint 'ftp://example.org': the URL must start with http://" in one_error_line(result)


def test_an_unreachable_server_is_one_line(cli, unused_port, one_error_line) -> None:
    result = cli("rerank", "--endpoint", f"http://127.0.0.1:{unused_port}", "--timeout", "3", QUERY, *DOCS)
    assert result.returncode == 1
    assert "cannot connect" in one_error_line(result)


# --- issue 15: odd input at the edge ---------------------------------------------------------------------


@pytest.mark.parametrize(("args", "stdin", "closed", "needle"), [
    (["--file", "-", QUERY], None, True, "cannot read stdin: it is closed"),
    (["--file", "-", QUERY], "", False, "no documents to rank"),
    (["--file", "-", QUERY], '"ok"\n"half a pair \\ud800 here"\n', False, "stdin line 2: not valid Unicode text"),
    (["--file", "-", "--format", "jsonl", QUERY], "[" * 100_000 + "\n", False, "stdin line 1: JSON this reader"),
    (["--file", "-", QUERY], '{"text": "' + "[" * 5000 + '"}\n{"a": ' + "[" * 100_000 + "\n", False,
     "stdin line 2: JSON this reader"),
])
def test_closed_empty_or_broken_stdin_is_one_line_and_exit_2(cli, infinity, one_error_line, args, stdin, closed,
                                                             needle) -> None:
    result = cli("rerank", "--endpoint", infinity.url, *args, input=stdin, stdin_closed=closed)
    assert result.returncode == 2, result.stderr
    assert needle in one_error_line(result)


@pytest.mark.parametrize(("args", "needle"), [
    ([b"caf\xe9 query", "a document"], "QUERY: not valid Unicode text at character 4"),
    ([QUERY, "fine", b"\xff\xfe broken"], "DOC 2: not valid Unicode text at character 1"),
])
def test_undecodable_argv_bytes_are_one_line_with_a_strict_utf8_stdout(cli, infinity, one_error_line, args,
                                                                       needle) -> None:
    result = cli("rerank", "--endpoint", infinity.url, *args)
    assert result.returncode == 2, result.stderr
    assert needle in one_error_line(result)


def test_a_user_and_password_typed_into_the_url_are_never_printed(cli, one_error_line) -> None:
    for url in ("http://admin:hunter2@[::1", "http://admin:hunter2@127.0.0.1:1", "http://admin:hunter2@ex℀ample.com"):
        result = cli("rerank", "--endpoint", url, QUERY, *DOCS)
        assert result.returncode == 2, result.stderr
        line = one_error_line(result)
        assert "hunter2" not in line and "admin" not in line and "endpoint 'http://***@" in line, line


def test_max_queued_pairs_is_checked_like_the_setting(cli, infinity, one_error_line) -> None:
    result = cli("rerank", "--endpoint", infinity.url, "--max-queued-pairs", "2000000", QUERY, *DOCS)
    assert result.returncode == 2
    assert "--max-queued-pairs: must be between 1 and 1000000, got" in one_error_line(result)  # not 1e+06


def test_max_queued_pairs_lets_one_call_rank_more_documents_than_the_default_bound(cli, infinity, tmp_path) -> None:
    path = tmp_path / "many.txt"
    many = 4200  # more than rerank_max_queued_pairs' default, 4096
    path.write_text("\n".join(f"document {i} about {'France' if i % 7 == 0 else 'bananas'}" for i in range(many)),
                    encoding="utf-8")
    result = cli("rerank", "--endpoint", infinity.url, "--max-queued-pairs", "8192", "--file", str(path), "--json",
                 "--top", "3", QUERY, timeout=120)
    assert result.returncode == 0, result.stderr
    assert all("France" in item["document"] for item in json.loads(result.stdout)["results"])


def test_a_blank_document_ranks_last_in_json_that_parses(cli, infinity) -> None:
    """A blank document is not sent and ranks last; its score, below every other, is null in the JSON
    (``-Infinity`` is no JSON: a strict parser refused the whole output)."""
    result = cli("rerank", "--endpoint", infinity.url, "--json", QUERY, DOCS[1], "  ", DOCS[0])
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"not JSON: {name}"))["results"]
    assert [item["index"] for item in results] == [0, 2, 1] and results[-1]["score"] is None


@pytest.mark.parametrize("query", ["", "   "])
def test_a_blank_query_is_a_usage_error(cli, infinity, query: str) -> None:
    before = infinity.count()
    result = cli("rerank", "--endpoint", infinity.url, query, *DOCS)
    assert result.returncode == 2, result.stderr
    assert "QUERY: is blank" in result.stderr and infinity.count() == before
