"""``probe`` behind a socks proxy named in the environment: the one line says which variable names it and that
socks is not supported (an http:// proxy or NO_PROXY is what works), never the proxy's password."""

from __future__ import annotations

import json

import pytest

PASSWORD = "s0cks-pa55-DO-NOT-LEAK"
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
                   "ALL_PROXY", "all_proxy")


@pytest.mark.parametrize("variable", ["ALL_PROXY", "https_proxy"])
def test_probe_names_the_socks_proxy_variable_and_hides_its_password(cli, one_error_line, unused_port,
                                                                      monkeypatch, variable: str) -> None:
    for name in PROXY_VARIABLES:  # removed, not emptied: an empty lower-case variable unsets its upper-case one
        monkeypatch.delenv(name, raising=False)
    env = {variable: f"socks5h://corp-user:{PASSWORD}@127.0.0.1:{unused_port}"}
    result = cli("probe", "https://rerank.corp.test", "--timeout", "5", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    line = one_error_line(result)
    for expected in (variable, "socks", "not supported", "http://", "NO_PROXY"):
        assert expected in line, line
    assert PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize("endpoint", ["https://rerank.corp.test", "https://api.cohere.com"])
def test_probe_reports_the_socks_proxy_once_not_once_per_route(cli, unused_port, monkeypatch, endpoint: str) -> None:
    """The proxy is every route's: detection stops at the first, and the report says it once (nothing was sent)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    env = {"ALL_PROXY": f"socks5h://corp-user:{PASSWORD}@127.0.0.1:{unused_port}"}
    result = cli("probe", endpoint, "--timeout", "5", "--json", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert "not supported" in report["message"], report
    assert sum(text.count("not supported") for text in (report["message"], *report["attempts"])) == 1, report
