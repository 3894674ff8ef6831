"""Run a protocol app on 127.0.0.1 with instrumentation: recording, in-flight counts, gate, faults."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web
from anyio.from_thread import start_blocking_portal

from ..ports import fresh_socket
from .faults import Fault, FaultRule, as_rule
from .gate import Gate
from .monitor import StateMonitor
from .protocol_app import ProtocolApp
from .recording import RECORDED, RecordedRequest, record
from .registry import build
from .scoring import Scorer, lexical_scorer

_MAX_BODY = 256 * 1024 * 1024  # far above any real limit, so tests can send huge bodies
BACKLOG = 2048


class RunningServer:
    """A live test server: its URL, what it saw, and the knobs tests turn."""

    def __init__(self, kind: str, protocol: ProtocolApp) -> None:
        self.kind = kind
        self.protocol = protocol
        self.url = ""
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.monitor = StateMonitor()
        self.gate = Gate(self.monitor)
        self._counts: Counter[str] = Counter()
        self._fault: FaultRule | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def count(self, path: str | None = None) -> int:
        """Requests received for ``path`` (any method); all requests when None."""
        return len(self.requests) if path is None else self._counts[path]

    def set_fault(self, fault: Fault | FaultRule | None) -> None:
        """Inject faults: a rule ``fn(RecordedRequest) -> Fault | None``, one Fault, or None."""
        self._fault = as_rule(fault)

    def reset(self) -> None:
        """Forget recorded requests, counts and the in-flight maximum (not the live count)."""
        self.requests.clear()
        self._counts.clear()
        self.max_in_flight = self.in_flight

    async def wait_until(self, predicate: Callable[[RunningServer], bool], within_s: float = 10.0) -> None:
        """Return once ``predicate(server)`` holds (checked on every request start/end/gate change)."""
        await self.monitor.wait_until(lambda: predicate(self), within_s)

    def wait_until_sync(self, predicate: Callable[[RunningServer], bool], within_s: float = 10.0) -> None:
        """Blocking twin of :meth:`wait_until`; refuses to run on the server's own loop."""
        if _running_loop() is self._loop:
            raise RuntimeError("wait_until_sync would block the server's own event loop")
        self.monitor.wait_until_sync(lambda: predicate(self), within_s)

    async def start(self, port: int = 0) -> None:
        app = web.Application(client_max_size=_MAX_BODY, middlewares=[self._instrument])
        app.add_routes(self.protocol.routes())
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        # a backlog as uvicorn's (2048; aiohttp's default is 128): hundreds of connections at once are all accepted
        if port:
            await web.TCPSite(self._runner, "127.0.0.1", port, backlog=BACKLOG).start()
        else:  # never a port an earlier server of the session had (support.ports)
            await web.SockSite(self._runner, fresh_socket(), backlog=BACKLOG).start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        self._loop = asyncio.get_running_loop()

    async def close(self) -> None:
        """Stop: release the gate, cancel handlers still running (hangs, stalls), close sockets."""
        self.gate.release()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _instrument(self, request: web.Request, handler: Any) -> web.StreamResponse:
        seen = request[RECORDED] = await record(request)
        self.requests.append(seen)
        self._counts[seen.path] += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._enter()
        try:
            await self.gate.passage(seen)
            return await self._answer(request, handler, seen)
        finally:
            self._tasks.discard(task)
            self._leave()

    async def _answer(self, request: web.Request, handler: Any, seen: RecordedRequest) -> web.StreamResponse:
        rule = self._fault
        fault = rule(seen) if rule is not None else None

        async def proceed() -> web.StreamResponse:
            return await self._route(request, handler)

        return await fault.apply(request, proceed) if fault is not None else await proceed()

    async def _route(self, request: web.Request, handler: Any) -> web.StreamResponse:
        miss = request.match_info.http_exception
        early = self.protocol.guard(request, matched=miss is None)
        if early is not None:
            return early
        if miss is not None:
            return self.protocol.route_miss(request, miss.status)
        response: web.StreamResponse = await handler(request)
        return response

    def _enter(self) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.monitor.notify()

    def _leave(self) -> None:
        self.in_flight -= 1
        self.monitor.notify()


async def start_server(kind: str, *, scorer: Scorer = lexical_scorer, port: int = 0, **options: Any
                       ) -> RunningServer:
    """Start a ``kind`` server on the running loop, bound to 127.0.0.1 on ``port`` (0: a free one)."""
    server = RunningServer(kind, build(kind, scorer=scorer, **options))
    await server.start(port)
    return server


@contextmanager
def serve_in_thread(kind: str, *, scorer: Scorer = lexical_scorer, **options: Any) -> Iterator[RunningServer]:
    """Run a ``kind`` server on its own event loop in a background thread, for sync tests."""
    with start_blocking_portal(backend="asyncio") as portal:
        server = portal.call(lambda: start_server(kind, scorer=scorer, **options))
        try:
            yield server
        finally:
            portal.call(server.close)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
