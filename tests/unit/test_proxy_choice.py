"""Which proxy variable an endpoint's request uses: its scheme's own (lower case first), else ALL_PROXY, as curl,
httpx and requests read them; NO_PROXY and loopback still go direct; a socks proxy is a setting named by its
variable, never with its password."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from usr.plugins.a0_reranker.core.errors import ConfigError
from usr.plugins.a0_reranker.service.proxies import proxy_for

VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("REQUEST_METHOD", raising=False)
    yield monkeypatch


@pytest.mark.parametrize(("endpoint", "settings", "expected"), [
    ("https://api.cohere.com", {"ALL_PROXY": "http://all:3128"}, "http://all:3128"),
    ("http://reranker.corp", {"all_proxy": "all:3128"}, "http://all:3128"),
    ("http://reranker.corp", {"ALL_PROXY": "http://upper:1", "all_proxy": "http://lower:2"}, "http://lower:2"),
    ("https://api.cohere.com", {"HTTPS_PROXY": "http://own:1", "ALL_PROXY": "http://all:2"}, "http://own:1"),
    ("http://reranker.corp", {"http_proxy": "http://own:1", "all_proxy": "http://all:2"}, "http://own:1"),
    ("http://reranker.corp", {"HTTPS_PROXY": "http://other:1", "ALL_PROXY": "http://all:2"}, "http://all:2"),
])
def test_the_scheme_s_own_variable_wins_and_all_proxy_serves_the_rest(
        env: pytest.MonkeyPatch, endpoint: str, settings: dict[str, str], expected: str) -> None:
    for name, value in settings.items():
        env.setenv(name, value)
    proxy, headers = proxy_for(endpoint)
    assert str(proxy) == expected and headers == {}


@pytest.mark.parametrize(("endpoint", "no_proxy"), [
    ("http://reranker.corp.internal:8000", "corp.internal"),
    ("https://api.cohere.com", "*"),
    ("http://127.0.0.1:7997", ""),
    ("http://[::1]:7997", ""),
])
def test_no_proxy_and_loopback_go_direct_under_all_proxy(env: pytest.MonkeyPatch, endpoint: str,
                                                         no_proxy: str) -> None:
    env.setenv("ALL_PROXY", "socks5://u:secret@proxy:1080")  # not even a socks proxy is in the way of these
    env.setenv("NO_PROXY", no_proxy)
    assert proxy_for(endpoint) == (None, {})


def test_all_proxy_credentials_become_the_proxy_s_header_only(env: pytest.MonkeyPatch) -> None:
    env.setenv("ALL_PROXY", "http://corp-user:pa55@proxy.corp:3128")
    proxy, headers = proxy_for("https://api.cohere.com")
    assert str(proxy) == "http://proxy.corp:3128"
    assert headers == {"Proxy-Authorization": "Basic Y29ycC11c2VyOnBhNTU="}


@pytest.mark.parametrize(("variable", "endpoint"), [
    ("ALL_PROXY", "https://api.cohere.com"), ("all_proxy", "http://reranker.corp"),
    ("HTTPS_PROXY", "https://api.cohere.com"), ("https_proxy", "https://api.cohere.com"),
    ("HTTP_PROXY", "http://reranker.corp"), ("http_proxy", "http://reranker.corp"),
])
@pytest.mark.parametrize("scheme", ["socks4", "socks4a", "socks5", "socks5h", "SOCKS5"])
def test_a_socks_proxy_is_a_setting_named_by_its_variable(env: pytest.MonkeyPatch, variable: str, endpoint: str,
                                                          scheme: str) -> None:
    env.setenv(variable, f"{scheme}://corp-user:s3cret-pa55@proxy.corp:1080")
    with pytest.raises(ConfigError) as raised:
        proxy_for(endpoint)
    message = str(raised.value)
    assert message.startswith(f"{variable} in the environment names a {scheme.lower()}:// proxy (proxy.corp:1080)")
    assert "socks proxies are not supported" in message
    assert f"set {endpoint.partition(':')[0].upper()}_PROXY to an http:// proxy" in message
    assert "NO_PROXY" in message
    assert "s3cret-pa55" not in message and "corp-user" not in message


def test_a_socks_proxy_without_a_port_is_named_by_its_host(env: pytest.MonkeyPatch) -> None:
    env.setenv("ALL_PROXY", "socks5h://corp-user:s3cret-pa55@proxy.corp")
    with pytest.raises(ConfigError, match=r"^ALL_PROXY in the environment names a socks5h:// proxy \(proxy.corp\):"):
        proxy_for("https://api.cohere.com")
