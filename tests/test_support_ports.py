"""The suite's servers never share a port within a session (``support.ports``): the engine keeps a server's
breaker, Retry-After and detected API by URL, so a repeated port hands a later test an earlier server's verdicts."""

from __future__ import annotations

import http.server
from urllib.parse import urlsplit

import pytest
from reliability.hostile_servers import OtherService

from support import ports
from support.forward_proxy import ForwardProxy
from support.outages import closed_port
from support.ports import fresh_port, fresh_socket, listen_on_fresh_port
from support.servers import start_server

DRAWS = 600  # a plain bind to port 0 repeated 10 to 15 of these in each of five tries on Linux 6


def test_no_port_is_handed_out_twice_though_each_is_closed_before_the_next() -> None:
    ports = []
    for _ in range(DRAWS):
        with fresh_socket() as sock:
            ports.append(sock.getsockname()[1])
    assert len(set(ports)) == DRAWS


@pytest.mark.anyio
async def test_a_server_started_after_another_closed_gets_another_port() -> None:
    first = await start_server("vllm")
    await first.close()
    second = await start_server("vllm")
    try:
        assert second.url != first.url
    finally:
        await second.close()


@pytest.mark.anyio
async def test_every_other_listener_of_the_suite_takes_its_port_from_the_registry() -> None:
    """The servers that are not protocol servers (another service, the forward proxy, a plain file server) and the
    ports meant to refuse connections come from ``support.ports`` too."""
    other = OtherService()
    proxy = await ForwardProxy().start()
    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler,
                                            bind_and_activate=False)
    listen_on_fresh_port(files)
    try:
        got = [urlsplit(other.url).port, urlsplit(proxy.url).port, files.server_address[1], closed_port()]
    finally:
        other.server_close()
        await proxy.close()
        files.server_close()
    assert all(port in ports._HANDED_OUT for port in got), got


@pytest.mark.parametrize("workers", [2, 3])
def test_pytest_xdist_workers_hand_out_ports_from_shares_that_do_not_meet(monkeypatch: pytest.MonkeyPatch,
                                                                          workers: int) -> None:
    """Each worker of a parallel run hands out only its share of the kernel's ports, so one worker's server never
    gets a port another worker handed out (to a server, a subprocess about to bind it, or a URL that must refuse)."""
    shares = []
    for index in range(workers):
        monkeypatch.setattr(ports, "SHARE", (index, workers))
        shares.append({fresh_port() for _ in range(40)})
        assert all(ports.ours(port) for port in shares[-1])
    assert sum(len(share) for share in shares) == len(set().union(*shares)) == 40 * workers
    odd = range(32769, 32769 + 2 * 600, 2)  # bind(0) gives mostly odd ports: each share must hold its part of them
    for index in range(workers):
        monkeypatch.setattr(ports, "SHARE", (index, workers))
        assert sum(map(ports.ours, odd)) >= len(odd) // workers - 1
