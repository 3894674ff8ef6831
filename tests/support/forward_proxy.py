"""A forward HTTP proxy on 127.0.0.1, the kind a corporate network puts between its machines and the internet
(squid's behaviour in the two forms clients use): ``CONNECT host:port`` opens a tunnel (RFC 9110 §9.3.6; for
HTTPS, so the proxy sees no header and no body), and a request in absolute form (``POST http://host:port/path``,
RFC 9112 §3.2.2) is passed on as it came (plain HTTP). It resolves host names from its own table, as the proxy's DNS would, so a
test needs no real name; it records each target and answers 407 to a request without the credentials it needs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .ports import fresh_socket

_REFUSED = (b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\n"
            b"Content-Length: 0\r\nConnection: close\r\n\r\n")


@dataclass(eq=False)
class ForwardProxy:
    """``hosts``: name -> (address, port) the proxy connects to; ``credentials``: "user:password" it requires."""

    hosts: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    credentials: str | None = None
    targets: list[str] = field(default_factory=list)  # "host:port" of each tunnel or request passed on
    refused: int = 0  # requests answered 407
    url: str = ""
    _server: asyncio.Server | None = None
    _connections: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> ForwardProxy:
        self._server = await asyncio.start_server(self._serve, sock=fresh_socket())
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def close(self) -> None:
        """Stop listening, end every connection still open (a client's kept-alive one too) and wait until each
        socket is closed: Python 3.11's ``wait_closed`` does not wait for them, and a socket left to the loop's
        end is an unclosed-socket warning in some later test."""
        if self._server is not None:
            self._server.close()
            for task in self._connections:
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        writers = [writer]
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            if not self._authorized(head):
                self.refused += 1
                writer.write(_REFUSED)
                await writer.drain()
                return
            tunnel = method == "CONNECT"
            host, port = _host_port(target) if tunnel else _url_host_port(target)
            self.targets.append(f"{host}:{port}")
            up_reader, up_writer = await asyncio.open_connection(*self.hosts.get(host, (host, port)))
            writers.append(up_writer)
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(head)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            pass  # close() ends the connection; ending normally keeps asyncio from logging the cancellation
        finally:
            for each in writers:
                each.close()
            for each in writers:
                with contextlib.suppress(OSError):
                    await each.wait_closed()
            self._connections.discard(task)

    def _authorized(self, head: bytes) -> bool:
        if self.credentials is None:
            return True
        expected = b"Basic " + base64.b64encode(self.credentials.encode())
        fields = (line.partition(b":") for line in head.split(b"\r\n")[1:])
        return any(name.strip().lower() == b"proxy-authorization" and value.strip() == expected
                   for name, _, value in fields)


def _host_port(authority: str) -> tuple[str, int]:
    host, _, port = authority.rpartition(":")
    return host.strip("[]"), int(port)


def _url_host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except OSError:
        pass
    finally:
        sink.close()
