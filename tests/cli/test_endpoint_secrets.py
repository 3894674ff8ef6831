"""A user name and password typed into any entry of an endpoint list never reach the terminal (issue 21,
finding 3): every command that takes an endpoint refuses the list in one line that names the bad entry
by its position and quotes the list with each ``user:password@`` masked, with or without ``--json``."""

from __future__ import annotations

import pytest

USER, PASSWORD = "admin7", "hunter2"
A, B = "http://127.0.0.1:1", "http://127.0.0.1:2"
SECRET_B = f"http://{USER}:{PASSWORD}@127.0.0.1:2"

# the endpoint list as typed, the entry the message names, and the list as it is quoted
LISTS = {
    "first": (f"{SECRET_B}, {A}", "entry 1 of 2 must not contain a user name or password",
              f"'http://***@127.0.0.1:2, {A}'"),
    "later": (f"{A}, {SECRET_B}", "entry 2 of 2 must not contain a user name or password",
              f"'{A}, http://***@127.0.0.1:2'"),
    "later, another entry bad": (f"ftp://127.0.0.1:1\n{A} {SECRET_B}", "entry 1 of 3 must start with http://",
                                 f"'ftp://127.0.0.1:1, {A}, http://***@127.0.0.1:2'"),
    # a comma or space in a password separates no entries: the entry is refused whole and counted once
    "a comma in the password": (f"{A}, http://{USER}:hun,ter2@127.0.0.1:2",
                                "entry 2 of 2 must not contain a user name or password",
                                f"'{A}, http://***@127.0.0.1:2'"),
    "a space in the password": (f"{A} http://{USER}:hun ter2@127.0.0.1:2",
                                "entry 2 of 2 must not contain a user name or password",
                                f"'{A}, http://***@127.0.0.1:2'"),
    "spaces in a lone URL's password": (f"http://{USER}:hun ter2 x@127.0.0.1:2",
                                        "must not contain a user name or password", "'http://***@127.0.0.1:2'"),
    "an @ and a space in the password": (f"{A} http://{USER}:hun@ter2 x@127.0.0.1:2",
                                         "entry 2 of 2 must not contain a user name or password",
                                         f"'{A}, http://***@127.0.0.1:2'"),
}

# each command that echoes an endpoint, given the list; ``--json`` where the command has it ("bench" is
# the developers' benchmark program, ``python -m a0_reranker.bench``)
COMMANDS = {
    "probe": lambda endpoint, out: ["probe", endpoint],
    "probe --json": lambda endpoint, out: ["probe", "--json", endpoint],
    "rerank": lambda endpoint, out: ["rerank", "--endpoint", endpoint, "query", "a document"],
    "rerank --json": lambda endpoint, out: ["rerank", "--json", "--endpoint", endpoint, "query", "a document"],
    "demo": lambda endpoint, out: ["demo", "--endpoint", endpoint],
    "demo --json": lambda endpoint, out: ["demo", "--json", "--endpoint", endpoint],
    "bench": lambda endpoint, out: ["--quick", "--endpoint", endpoint, "--out", out],
}


def assert_no_secret(text: str) -> None:
    assert PASSWORD not in text and USER not in text and "hun" not in text and "ter2" not in text, text


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", LISTS)
def test_no_entry_of_an_endpoint_list_shows_its_password(cli, bench_cli, one_error_line, tmp_path, command: str,
                                                         case: str) -> None:
    endpoint, named, quoted = LISTS[case]
    result = (bench_cli if command == "bench" else cli)(*COMMANDS[command](endpoint, str(tmp_path)))
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert_no_secret(line)
    assert f"endpoint {quoted}: the URL {named}" in line, line


def test_probe_with_the_entries_as_separate_arguments_shows_no_password(cli, one_error_line) -> None:
    result = cli("probe", A, SECRET_B)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert_no_secret(line)
    assert f"endpoint '{A}, http://***@127.0.0.1:2': the URL entry 2 of 2 must not contain" in line, line


@pytest.mark.parametrize("command", ["demo", "bench"])
def test_an_entry_given_as_a_stray_argument_is_refused_without_its_password(cli, bench_cli, one_error_line,
                                                                           tmp_path, command: str) -> None:
    """A list typed unquoted: the entry after the first is an argument the command does not take."""
    if command == "bench":
        result = bench_cli("--endpoint", A, SECRET_B, "--out", str(tmp_path))
    else:
        result = cli(command, "--endpoint", A, SECRET_B, "--json")
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert_no_secret(line)
    assert "unrecognized arguments: http://***@127.0.0.1:2" in line, line
