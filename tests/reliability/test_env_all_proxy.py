"""ALL_PROXY, and a socks proxy named in any proxy variable. ALL_PROXY is the proxy for a scheme no variable of its
own names, as curl, httpx and requests read it (a scheme's own variable wins; NO_PROXY and loopback still go direct).
A socks proxy needs a client this plugin does not carry: the recall falls back, naming the variable, never its
password, and never goes around the proxy the user set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio.to_thread
import pytest
import trustme
from reliability.kit import LIMIT, QUERY, config_for, make_pool, shown_text
from reliability.proxy_kit import HOSTED_NAME, KEY, LAN_NAME, PROXY_PASSWORD, address, without_proxy_variables
from reliability.tls_server import tls_server, write_ca_bundle

from support.forward_proxy import ForwardProxy
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

pytestmark = pytest.mark.anyio


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield from without_proxy_variables(monkeypatch)


def with_credentials(url: str) -> str:
    return url.replace("://", f"://corp-user:{PROXY_PASSWORD}@")


@pytest.mark.parametrize("variable", ["ALL_PROXY", "all_proxy"])
async def test_all_proxy_carries_plain_http_with_the_credentials_of_its_url(
        environment: pytest.MonkeyPatch, serve: object, variable: str) -> None:
    server = serve("vllm")  # type: ignore[operator]
    host, port = address(server)
    proxy = await ForwardProxy(hosts={LAN_NAME: (host, port)}, credentials=f"corp-user:{PROXY_PASSWORD}").start()
    try:
        environment.setenv(variable, with_credentials(proxy.url))
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT,
                                    config=config_for("vllm", f"http://{LAN_NAME}:{port}", timeout=5))
        assert outcome.applied, outcome.message
        assert proxy.refused == 0 and set(proxy.targets) == {f"{LAN_NAME}:{port}"}
    finally:
        await proxy.close()


async def test_all_proxy_tunnels_to_a_hosted_api_which_never_sees_the_proxy_credentials(
        environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    test_ca = trustme.CA()
    with tls_server("cohere", test_ca, names=(HOSTED_NAME,)) as server:
        server.protocol.api_key = KEY  # type: ignore[attr-defined]
        proxy = await ForwardProxy(hosts={HOSTED_NAME: address(server)},
                                   credentials=f"corp-user:{PROXY_PASSWORD}").start()
        try:
            environment.setenv("ALL_PROXY", with_credentials(proxy.url))
            config = RerankerConfig(endpoint=f"https://{HOSTED_NAME}/v1/rerank", model="rerank-v3.5", api_key=KEY,
                                    ca_bundle=str(write_ca_bundle(test_ca, tmp_path)), timeout=5)
            outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
            assert outcome.applied, outcome.message
            assert proxy.refused == 0 and set(proxy.targets) == {f"{HOSTED_NAME}:443"}
            assert server.requests != []
            assert all("proxy-authorization" not in r.headers for r in server.requests)
        finally:
            await anyio.to_thread.run_sync(runtime.shutdown)  # its TLS connections close before the server goes
            await proxy.close()


@pytest.mark.parametrize("scheme_variable", ["HTTP_PROXY", "http_proxy"])
async def test_the_scheme_s_own_variable_wins_over_all_proxy(
        environment: pytest.MonkeyPatch, serve: object, scheme_variable: str) -> None:
    server = serve("vllm")  # type: ignore[operator]
    host, port = address(server)
    chosen = await ForwardProxy(hosts={LAN_NAME: (host, port)}).start()
    other = await ForwardProxy(hosts={LAN_NAME: (host, port)}).start()
    try:
        environment.setenv(scheme_variable, chosen.url)
        environment.setenv("ALL_PROXY", other.url)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT,
                                    config=config_for("vllm", f"http://{LAN_NAME}:{port}", timeout=5))
        assert outcome.applied, outcome.message
        assert set(chosen.targets) == {f"{LAN_NAME}:{port}"} and other.targets == []
    finally:
        await chosen.close()
        await other.close()


async def test_a_loopback_server_is_reached_directly_under_all_proxy(
        environment: pytest.MonkeyPatch, serve: object) -> None:
    server = serve("vllm")  # type: ignore[operator]
    proxy = await ForwardProxy().start()
    try:
        environment.setenv("ALL_PROXY", proxy.url)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config_for("vllm", server.url, timeout=5))
        assert outcome.applied, outcome.message
        assert proxy.targets == [] and server.requests != []
    finally:
        await proxy.close()


@pytest.mark.parametrize(("variable", "scheme"), [
    ("ALL_PROXY", "socks5"), ("all_proxy", "socks5h"), ("HTTP_PROXY", "socks4"), ("http_proxy", "socks5"),
])
async def test_a_socks_proxy_falls_back_as_a_setting_named_without_its_password(
        environment: pytest.MonkeyPatch, serve: object, everything_logged: pytest.LogCaptureFixture,
        variable: str, scheme: str) -> None:
    server = serve("vllm")  # type: ignore[operator]
    listener = await ForwardProxy(hosts={LAN_NAME: address(server)}).start()  # where the socks proxy would be
    try:
        environment.setenv(variable, with_credentials(listener.url.replace("http://", f"{scheme}://")))
        config = config_for("vllm", f"http://{LAN_NAME}:{address(server)[1]}", timeout=5)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
        assert not outcome.applied and outcome.reason == "config", outcome.message
        for expected in (variable, "socks", "not supported", "http://", "NO_PROXY"):
            assert expected in outcome.message
        report = await runtime.probe_async(config)
        assert not report.ok and variable in report.message and "socks" in report.message
        assert server.requests == [] and listener.targets == []  # neither around the proxy nor through it
        shown = shown_text(everything_logged, outcome, report, runtime.statistics().last_error)
        assert PROXY_PASSWORD not in shown
    finally:
        await listener.close()


async def test_a_socks_proxy_for_another_scheme_is_not_in_the_way(
        environment: pytest.MonkeyPatch, serve: object) -> None:
    """HTTPS_PROXY=socks5://... says nothing about an http:// endpoint, which ALL_PROXY's http proxy carries."""
    server = serve("vllm")  # type: ignore[operator]
    host, port = address(server)
    proxy = await ForwardProxy(hosts={LAN_NAME: (host, port)}).start()
    try:
        environment.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
        environment.setenv("ALL_PROXY", proxy.url)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT,
                                    config=config_for("vllm", f"http://{LAN_NAME}:{port}", timeout=5))
        assert outcome.applied, outcome.message
        assert set(proxy.targets) == {f"{LAN_NAME}:{port}"}
    finally:
        await proxy.close()


async def test_a_socks_proxy_stops_detection_at_the_first_route_and_is_reported_once(
        environment: pytest.MonkeyPatch, serve: object) -> None:
    """The proxy applies to every route the probe would try: naming it once per route says nothing more."""
    server = serve("vllm")  # type: ignore[operator]
    environment.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    report = await runtime.probe_async(config_for("vllm", f"http://{LAN_NAME}:{address(server)[1]}", timeout=5))
    assert not report.ok and "ALL_PROXY" in report.message
    assert sum(text.count("not supported") for text in (report.message, *report.attempts)) == 1, report
    assert server.requests == []
