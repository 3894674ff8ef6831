"""An endpoint that is empty (or only separators) is bad input, as docs/cli.md counts a URL: exit 2 with one
line that says an endpoint is missing, not exit 1 ("the server is unreachable") nor, for ``demo``, a silent
run against the embedded demo server instead of the server the user meant to name."""

from __future__ import annotations

import pytest

COMMANDS = {
    "probe": ["probe", ""],
    "probe, only separators": ["probe", " , "],
    "rerank": ["rerank", "--endpoint", "", "query", "a document"],
    "rerank --json": ["rerank", "--json", "--endpoint", " ", "query", "a document"],
    "demo": ["demo", "--endpoint", ""],
    "demo --json": ["demo", "--json", "--endpoint", ","],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_an_empty_endpoint_is_bad_input(cli, one_error_line, command: str) -> None:
    result = cli(*COMMANDS[command], timeout=60)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    line = one_error_line(result)
    assert "endpoint" in line and "no URL" in line, line
