"""Any protocol server over HTTPS on 127.0.0.1, with a certificate from a throwaway test CA (trustme).

The client does not trust that CA unless it is told to (``rerank_ca_bundle``), so the same server
serves the three TLS cases: verified by default and refused, trusted through a CA bundle, and
accepted with ``rerank_tls_verify: false``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trustme
from aiohttp import web
from anyio.from_thread import start_blocking_portal

from support.ports import fresh_socket
from support.servers import RunningServer
from support.servers.registry import build


class TlsServer(RunningServer):
    """A ``RunningServer`` (recording, gate, faults) whose socket speaks TLS."""

    def __init__(self, kind: str, context: ssl.SSLContext) -> None:
        super().__init__(kind, build(kind))
        self._context = context

    async def start(self) -> None:
        """As ``RunningServer.start``, with the TLS context on the listening socket."""
        app = web.Application(middlewares=[self._instrument])
        app.add_routes(self.protocol.routes())
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.SockSite(self._runner, fresh_socket(), ssl_context=self._context).start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"https://{host}:{port}"
        self._loop = asyncio.get_running_loop()


@contextmanager
def tls_server(kind: str, ca: trustme.CA, names: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Iterator[TlsServer]:
    """Serve ``kind`` over HTTPS with a certificate for ``names`` issued by ``ca``, in a thread."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    with start_blocking_portal(backend="asyncio") as portal:
        server = TlsServer(kind, context)
        portal.call(server.start)
        try:
            yield server
        finally:
            portal.call(server.close)


def write_ca_bundle(ca: trustme.CA, folder: Path) -> Path:
    """The CA certificate as a PEM file, what a user points ``rerank_ca_bundle`` at."""
    path = folder / "test-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path
