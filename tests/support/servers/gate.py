"""Hold requests inside a server and let them go when the test says so.

``hold()`` makes every later matching request wait inside the server (it counts as in flight);
``release()`` lets them all through, ``release(n)`` lets exactly ``n`` through. Both are safe from
any thread or loop, and take effect before they return, so no sleep is ever needed.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable

from .monitor import StateMonitor
from .recording import RecordedRequest

Match = Callable[[RecordedRequest], bool]


class Gate:
    """A thread-safe turnstile in front of every handler of one server."""

    def __init__(self, monitor: StateMonitor) -> None:
        self._monitor = monitor
        self._lock = threading.Lock()
        self._open = True
        self._match: Match | None = None
        self._permits = 0
        self._waiting: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def held(self) -> int:
        """How many requests are waiting at the gate right now."""
        return len(self._waiting)

    @property
    def is_open(self) -> bool:
        return self._open

    def hold(self, match: Match | None = None) -> None:
        """Make later requests wait; with ``match``, only those it returns True for."""
        with self._lock:
            self._open, self._match, self._permits = False, match, 0

    def release(self, count: int | None = None) -> None:
        """Open the gate (``None``), or let exactly ``count`` requests pass and stay closed."""
        with self._lock:
            if count is None:
                self._open, self._match, self._permits = True, None, 0
                woken = list(self._waiting)
                self._waiting.clear()
            else:
                woken = [self._waiting.popleft() for _ in range(min(count, len(self._waiting)))]
                self._permits += count - len(woken)
        for loop, future in woken:
            loop.call_soon_threadsafe(_pass, future)
        self._monitor.notify()

    async def passage(self, request: RecordedRequest) -> None:
        """Called by the server for each request: returns when the request may proceed."""
        future = self._enter(request)
        if future is None:
            return
        self._monitor.notify()
        try:
            await future
        finally:
            self._leave(future)

    async def wait_held(self, count: int, within_s: float = 10.0) -> None:
        """Return once at least ``count`` requests are waiting at the gate."""
        await self._monitor.wait_until(lambda: self.held >= count, within_s)

    def wait_held_sync(self, count: int, within_s: float = 10.0) -> None:
        """Blocking twin of :meth:`wait_held`."""
        self._monitor.wait_until_sync(lambda: self.held >= count, within_s)

    def _enter(self, request: RecordedRequest) -> asyncio.Future[None] | None:
        with self._lock:
            if self._open or (self._match is not None and not self._match(request)):
                return None
            if self._permits > 0:
                self._permits -= 1
                return None
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()
            self._waiting.append((loop, future))
            return future

    def _leave(self, future: asyncio.Future[None]) -> None:
        with self._lock:
            for entry in list(self._waiting):
                if entry[1] is future:
                    self._waiting.remove(entry)
        self._monitor.notify()


def _pass(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
