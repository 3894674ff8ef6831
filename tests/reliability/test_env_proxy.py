"""Behind a corporate proxy: HTTPS_PROXY / HTTP_PROXY and NO_PROXY in the environment, which curl, pip, requests and
A0's own model calls honour. A hosted API is reached through the proxy's tunnel by a name only the proxy resolves,
its TLS still the server's own (the certificate checked for that name, the key inside the tunnel); the proxy's
credentials come from its URL and never show; a server NO_PROXY names is reached directly."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import pytest
import trustme
from reliability.kit import LIMIT, QUERY, config_for, make_pool, shown_text
from reliability.proxy_kit import HOSTED_NAME, KEY, LAN_NAME, PROXY_PASSWORD, address, without_proxy_variables
from reliability.tls_server import tls_server, write_ca_bundle

from support.forward_proxy import ForwardProxy
from support.outages import closed_port_url
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

pytestmark = pytest.mark.anyio


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield from without_proxy_variables(monkeypatch)


@pytest.fixture(scope="module")
def test_ca() -> trustme.CA:
    return trustme.CA()


async def test_a_hosted_api_is_reached_through_the_https_proxy_tunnel(
        environment: pytest.MonkeyPatch, test_ca: trustme.CA, tmp_path: Path) -> None:
    bundle = write_ca_bundle(test_ca, tmp_path)
    with tls_server("cohere", test_ca, names=(HOSTED_NAME,)) as server:
        server.protocol.api_key = KEY  # type: ignore[attr-defined]
        proxy = await ForwardProxy(hosts={HOSTED_NAME: address(server)}).start()
        try:
            environment.setenv("HTTPS_PROXY", proxy.url)
            config = RerankerConfig(endpoint=f"https://{HOSTED_NAME}/v1/rerank", model="rerank-v3.5", api_key=KEY,
                                    ca_bundle=str(bundle), timeout=5)
            outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
            assert outcome.applied, outcome.message
            assert set(proxy.targets) == {f"{HOSTED_NAME}:443"}
            assert server.count("/v1/rerank") >= 1
        finally:
            await anyio.to_thread.run_sync(runtime.shutdown)  # its TLS connections close before the server goes
            await proxy.close()


async def test_plain_http_goes_through_the_proxy_with_the_credentials_of_its_url(
        environment: pytest.MonkeyPatch, serve: object) -> None:
    server = serve("vllm")  # type: ignore[operator]
    host, port = address(server)
    proxy = await ForwardProxy(hosts={LAN_NAME: (host, port)}, credentials=f"corp-user:{PROXY_PASSWORD}").start()
    try:
        environment.setenv("HTTP_PROXY", proxy.url.replace("://", f"://corp-user:{PROXY_PASSWORD}@"))
        config = config_for("vllm", f"http://{LAN_NAME}:{port}", timeout=5)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
        assert outcome.applied, outcome.message
        assert proxy.refused == 0 and set(proxy.targets) == {f"{LAN_NAME}:{port}"}
    finally:
        await proxy.close()


async def test_a_proxy_refusing_its_credentials_is_named_and_they_never_show(
        environment: pytest.MonkeyPatch, serve: object, everything_logged: pytest.LogCaptureFixture) -> None:
    server = serve("vllm")  # type: ignore[operator]
    proxy = await ForwardProxy(hosts={LAN_NAME: address(server)}, credentials="corp-user:the-right-one").start()
    try:
        environment.setenv("HTTP_PROXY", proxy.url.replace("://", f"://corp-user:{PROXY_PASSWORD}@"))
        config = config_for("vllm", f"http://{LAN_NAME}:{address(server)[1]}", timeout=5)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
        assert not outcome.applied and outcome.reason == "connect"
        assert "proxy" in outcome.message and "407" in outcome.message
        report = await runtime.probe_async(config)
        assert not report.ok and "proxy" in report.message
        assert proxy.refused >= 1 and server.requests == []
        shown = shown_text(everything_logged, outcome, report, runtime.statistics().last_error)
        assert PROXY_PASSWORD not in shown
    finally:
        await proxy.close()


@pytest.mark.parametrize("no_proxy", ["", "localhost,127.0.0.1", "*"])
async def test_a_loopback_server_is_reached_directly(environment: pytest.MonkeyPatch, serve: object,
                                                     no_proxy: str) -> None:
    """A proxy elsewhere cannot reach this machine's loopback: NO_PROXY or not, the request goes direct."""
    server = serve("vllm")  # type: ignore[operator]
    proxy = await ForwardProxy().start()
    try:
        environment.setenv("HTTP_PROXY", proxy.url)
        environment.setenv("NO_PROXY", no_proxy)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config_for("vllm", server.url, timeout=5))
        assert outcome.applied, outcome.message
        assert proxy.targets == [] and server.requests != []
    finally:
        await proxy.close()


async def test_a_tunnel_the_proxy_refuses_is_named_as_the_proxy_s_refusal(environment: pytest.MonkeyPatch) -> None:
    proxy = await ForwardProxy(credentials="corp-user:the-right-one").start()
    try:
        environment.setenv("HTTPS_PROXY", proxy.url.replace("://", f"://corp-user:{PROXY_PASSWORD}@"))
        config = RerankerConfig(endpoint=f"https://{HOSTED_NAME}", model="rerank-v3.5", api_key=KEY, timeout=5)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
        assert not outcome.applied and outcome.reason == "connect"
        assert "proxy refused" in outcome.message and "407" in outcome.message
        assert PROXY_PASSWORD not in outcome.message and proxy.refused >= 1
    finally:
        await proxy.close()


async def test_a_proxy_that_is_down_is_named_not_the_server_behind_it(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("HTTPS_PROXY", closed_port_url())
    config = RerankerConfig(endpoint=f"https://{HOSTED_NAME}", model="rerank-v3.5", api_key=KEY, timeout=5)
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    assert not outcome.applied and outcome.reason == "connect"
    assert "cannot connect to the proxy" in outcome.message


async def test_a_proxy_whose_name_does_not_resolve_is_named_not_the_server_behind_it(
        environment: pytest.MonkeyPatch) -> None:
    """aiohttp raises the same error for the proxy's name as for the server's: it used to read as the endpoint's,
    which sent the user to fix a correct endpoint instead of a typo in HTTPS_PROXY."""
    environment.setenv("HTTPS_PROXY", f"http://corp-user:{PROXY_PASSWORD}@corp-proxy.invalid:3128")
    config = RerankerConfig(endpoint=f"https://{HOSTED_NAME}", model="rerank-v3.5", api_key=KEY, timeout=5)
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    report = await runtime.probe_async(config)
    assert not outcome.applied and outcome.reason == "connect"
    for message in (outcome.message, report.message):
        assert "cannot resolve corp-proxy.invalid, the proxy that HTTPS_PROXY" in message, message
        assert PROXY_PASSWORD not in message


async def test_closing_the_stand_in_proxy_ends_the_connections_it_holds(serve: object) -> None:
    """The proxy must leave no socket for the event loop's end to find (an unclosed-socket warning that fails
    whichever test runs then): a client's kept-alive tunnel is closed by ``close()`` itself."""
    proxy = await ForwardProxy(hosts={LAN_NAME: address(serve("vllm"))}).start()  # type: ignore[operator]
    reader, writer = await open_stream(proxy.url)
    try:
        writer.write(f"CONNECT {LAN_NAME}:80 HTTP/1.1\r\nHost: {LAN_NAME}:80\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        await exchange_through(reader, writer)  # the server has accepted the tunnel's connection: its close ends it
        await proxy.close()
        with anyio.fail_after(10):  # a guard against hanging, not a wait: EOF is already there when close() returns
            assert await reader.read() == b""
    finally:
        writer.close()
        await writer.wait_closed()


async def open_stream(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return await asyncio.open_connection(parts.hostname, parts.port)


async def exchange_through(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request and its whole answer through an open tunnel, so the server behind it holds the connection as
    one of its own (closed when it stops) rather than one it may still be accepting when the test ends."""
    writer.write(f"GET /health HTTP/1.1\r\nHost: {LAN_NAME}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    length = next(int(line.partition(b":")[2]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    await reader.readexactly(length)
