"""Wait, from any thread or event loop, until a server's state satisfies a predicate.

The server changes its counters on its own loop; a test may wait on another loop or in a plain
thread. Waiters are woken by the change itself, never by polling or sleeping.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass

Predicate = Callable[[], bool]


@dataclass(eq=False)
class _Waiter:
    predicate: Predicate
    wake: Callable[[], None]


class StateMonitor:
    """A condition variable that both coroutines (on any loop) and threads can wait on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []

    def notify(self) -> None:
        """Re-check every waiter's predicate; call after each state change."""
        with self._lock:
            ready = [w for w in self._waiters if w.predicate()]
            for waiter in ready:
                self._waiters.remove(waiter)
        for waiter in ready:
            waiter.wake()

    async def wait_until(self, predicate: Predicate, within_s: float = 10.0) -> None:
        """Return once ``predicate()`` is true; raise TimeoutError after ``within_s`` seconds."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        waiter = _Waiter(predicate, lambda: _wake_on(loop, woken))
        if not self._add(waiter):
            return
        try:
            async with asyncio.timeout(within_s):
                await woken
        finally:
            self._discard(waiter)

    def wait_until_sync(self, predicate: Predicate, within_s: float = 10.0) -> None:
        """Blocking twin of :meth:`wait_until` for sync tests (never call it on the server's loop)."""
        event = threading.Event()
        waiter = _Waiter(predicate, event.set)
        if not self._add(waiter):
            return
        try:
            if not event.wait(within_s):
                raise TimeoutError(f"condition not met within {within_s}s")
        finally:
            self._discard(waiter)

    def _add(self, waiter: _Waiter) -> bool:
        """Register ``waiter`` unless its predicate already holds (then False)."""
        with self._lock:
            if waiter.predicate():
                return False
            self._waiters.append(waiter)
            return True

    def _discard(self, waiter: _Waiter) -> None:
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)


def _wake_on(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
    loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
