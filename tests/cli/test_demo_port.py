"""``demo --serve --port N`` with N past the last TCP port is bad input: one line and exit 2, before any
server starts, not the traceback of the socket's OverflowError (docs/cli.md: errors are one line)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("port", ["65536", "70000", "99999999999999999999"])
def test_a_port_past_65535_is_one_line_and_exit_2(cli, one_error_line, port: str) -> None:
    result = cli("demo", "--serve", "--port", port, timeout=30)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert "--port" in line and "65535" in line, line
