"""Ports for the suite's servers, each handed out once per session. The engine keeps what it learnt of a server by
its URL (an open breaker, a Retry-After, the API it detected) for the whole process, and the kernel may give a port
an earlier test's server had to a later one: about 400 servers in a run make such a repeat likely (a birthday draw
over ~28,000 ephemeral ports), and the later test then meets the earlier server's verdicts.

pytest-xdist's workers share the kernel's ports: each hands out only its own share of them, so no worker's server
gets a port another worker handed out (to its own server, a subprocess about to bind it, or a URL that must refuse)."""

from __future__ import annotations

import os
import socket
import socketserver

_HANDED_OUT: set[int] = set()
# (this worker's index, the number of workers); bind(0) gives mostly odd ports, so the share is by port // 2
SHARE = (int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")),
         int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def ours(port: int) -> bool:
    """Whether ``port`` is in this worker's share."""
    index, workers = SHARE
    return (port // 2) % workers == index


def fresh_socket() -> socket.socket:
    """A socket bound to 127.0.0.1 on a port no earlier call of this session returned (not yet listening)."""
    repeats: list[socket.socket] = []  # kept bound until a fresh port comes, so the kernel cannot offer them again
    try:
        while True:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            if port not in _HANDED_OUT and ours(port):
                _HANDED_OUT.add(port)
                return sock
            repeats.append(sock)
    finally:
        for sock in repeats:
            sock.close()


def fresh_port() -> int:
    """A port as ``fresh_socket`` hands it out, released: for a server that binds its own (a subprocess), or an
    address meant to refuse connections. Never handed out again, so no later server of the session gets it."""
    with fresh_socket() as sock:
        return int(sock.getsockname()[1])


def listen_on_fresh_port(server: socketserver.TCPServer) -> None:
    """Bind a ``socketserver`` server made with ``bind_and_activate=False`` to a fresh port, and listen."""
    server.socket.close()
    server.socket = fresh_socket()
    server.server_address = server.socket.getsockname()
    server.server_activate()
