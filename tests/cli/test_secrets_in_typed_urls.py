"""The command line repeats no secret typed where it does not belong (secrets, round four): an API key in an
endpoint's ``?query``, a token in its ``#fragment``, a password after a scheme typed with one slash or one
holding both ``@`` and ``/``, a token with a ``/`` typed as the user name (refused, not used: a URL parser reads
it as a host and a path), and the key itself given to ``--key-env`` in place of a variable's name. Each is
one line on stderr, exit 2, with the secret masked or left out."""

from __future__ import annotations

import pytest

GOOD = "http://127.0.0.1:1"
TYPED = {
    "key in the query": ("http://127.0.0.1:2/?api_key=sk-q7Zt93kXw4", ("sk-q7Zt93kXw4", "q7Zt93"),
                         "'http://127.0.0.1:2/?***'"),
    "token in the fragment": ("http://127.0.0.1:2/#access_token=tok-Vb82mQx1", ("tok-Vb82mQx1", "Vb82mQ"),
                              "'http://127.0.0.1:2/#***'"),
    "one slash after the scheme": ("http:/admin7:hunter2-d3f9@127.0.0.1:2", ("hunter2", "d3f9", "admin7"),
                                   "'http:/***@127.0.0.1:2'"),
    "@ and / in the password": ("http://admin7:h@nter/2-k8Lq@127.0.0.1:2", ("nter/2", "k8Lq", "admin7"),
                                "'http://***@127.0.0.1:2'"),
    "token with a / as the user name": ("https://tok3n/Zx9vQ+Lm2w@127.0.0.1:2", ("Zx9vQ", "Lm2w", "tok3n"),
                                        "'https://***@127.0.0.1:2'"),
}
COMMANDS = {
    "probe": lambda endpoint: ["probe", endpoint],
    "probe --json": lambda endpoint: ["probe", "--json", endpoint],
    "rerank": lambda endpoint: ["rerank", "--endpoint", endpoint, "query", "a document"],
    "demo": lambda endpoint: ["demo", "--endpoint", endpoint],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", TYPED)
def test_a_secret_typed_into_an_endpoint_is_not_printed(cli, one_error_line, command: str, case: str) -> None:
    typed, pieces, quoted = TYPED[case]
    result = cli(*COMMANDS[command](typed))
    assert result.returncode == 2, result.stdout + result.stderr  # refused before anything is sent
    line = one_error_line(result)
    for piece in pieces:
        assert piece not in line, line
    assert f"endpoint {quoted}: the URL" in line, line


def test_a_secret_in_a_later_entry_of_a_list_is_not_printed(cli, one_error_line) -> None:
    typed, pieces, quoted = TYPED["key in the query"]
    line = one_error_line(cli("probe", GOOD, typed))
    assert f"endpoint '{GOOD}, {quoted[1:]}: the URL entry 2 of 2 must not contain ?query" in line, line
    assert all(piece not in line for piece in pieces), line


@pytest.mark.parametrize("command", ["probe", "rerank", "demo"])
def test_the_key_given_to_key_env_in_place_of_a_name_is_not_printed(cli, one_error_line, command: str) -> None:
    key = "sk-live-4Hq8zR2mT7"
    args = {"probe": ["probe", GOOD], "rerank": ["rerank", "--endpoint", GOOD, "query", "a document"],
            "demo": ["demo", "--endpoint", GOOD]}[command]
    result = cli(*args, "--key-env", key)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_error_line(result)
    assert key not in line and "4Hq8zR2mT7" not in line, line
    assert "--key-env" in line and "not the key itself" in line, line


def test_a_variable_name_given_to_key_env_is_still_named(cli, one_error_line) -> None:
    line = one_error_line(cli("probe", GOOD, "--key-env", "A0_TEST_KEY"))
    assert "--key-env A0_TEST_KEY: the environment variable A0_TEST_KEY is not set or empty" in line, line
