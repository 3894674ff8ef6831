"""The owner event loop: one daemon thread per process running asyncio through anyio, with a
``BlockingPortal`` so that callers on any thread or loop can submit work to it.

Everything bound to a loop (the aiohttp session, the batchers, the detection cache) is created and
used on this loop only, which is how sessions never cross event loops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

T = TypeVar("T")


class OwnerLoop:
    def __init__(self, name: str = "a0-reranker-owner") -> None:
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._portal: BlockingPortal | None = None
        self._stop_event: anyio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self, timeout: float = 10.0) -> OwnerLoop:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the reranker's event loop did not start")
        if self._failure is not None:
            raise RuntimeError("the reranker's event loop failed to start") from self._failure
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self._portal is not None

    def is_current_thread(self) -> bool:
        return threading.get_ident() == self._thread.ident

    def submit(self, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> concurrent.futures.Future[T]:
        """Start ``func(*args)`` on the owner loop; cancelling the returned future cancels the task.

        Through asyncio's own thread-safe hand-over: a cancel from another thread is delivered to the
        task on the owner loop, whatever instant it arrives (also just as the task finishes)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(func(*args), self.loop)

    def call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``func(*args)`` on the owner loop and block for its result (never from the owner thread)."""
        assert self._portal is not None
        return self._portal.call(func, *args)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop after ``on_stop`` work; safe to call twice or from an atexit hook."""
        portal, stop_event = self._portal, self._stop_event
        if portal is None or stop_event is None or not self._thread.is_alive():
            return
        try:
            portal.call(stop_event.set)
        except RuntimeError:
            return  # the portal is already shut
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            anyio.run(self._main, backend="asyncio")
        except BaseException as exc:  # reported to start(); a daemon thread has no one else to tell
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop_event = anyio.Event()
        async with BlockingPortal() as portal:
            self._portal = portal
            self._ready.set()
            await self._stop_event.wait()
            await portal.stop(cancel_remaining=True)
        self._portal = None
