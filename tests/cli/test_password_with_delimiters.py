"""A password that holds a character URLs use as a delimiter (``#``, ``?``) is still a password typed
into the endpoint: the one-line refusal quotes the endpoint with its ``user:password@`` masked, as
docs/cli.md and docs/security.md promise, although such a URL parses as a fragment or a query."""

from __future__ import annotations

import pytest

USER = "admin7"
PASSWORDS = {"hash": "hun#ter2", "question mark": "hun?ter2", "both": "h?n#ter2"}


@pytest.mark.parametrize("case", PASSWORDS)
@pytest.mark.parametrize("command", ["probe", "rerank", "demo"])
def test_a_password_with_a_url_delimiter_is_not_printed(cli, one_error_line, command: str, case: str) -> None:
    password = PASSWORDS[case]
    endpoint = f"http://{USER}:{password}@127.0.0.1:2"
    args = {"probe": ["probe", endpoint], "rerank": ["rerank", "--endpoint", endpoint, "query", "a document"],
            "demo": ["demo", "--endpoint", endpoint]}[command]
    result = cli(*args)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert password not in line and "ter2" not in line and USER not in line, line
    assert "'http://***@127.0.0.1:2'" in line, line
