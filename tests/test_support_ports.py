"""The suite's servers never share a port within a session (``support.ports``): the engine keeps a server's
breaker, Retry-After and detected API by URL, so a repeated port hands a later test an earlier server's verdicts."""

from __future__ import annotations

import pytest

from support.ports import fresh_socket
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
