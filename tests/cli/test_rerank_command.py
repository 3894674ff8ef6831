"""``rerank``: documents from arguments, a file, stdin or JSON Lines; a table or ``--json``; one-line errors."""

from __future__ import annotations

import json

import pytest

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
