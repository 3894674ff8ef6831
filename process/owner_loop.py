"""The owner event loop: one daemon thread per process running asyncio, started with anyio's
``start_blocking_portal`` and kept until ``stop``, so that callers on any thread or loop can hand it
work.

Everything bound to a loop (the aiohttp session, the batchers, the detection cache) is created and
used on this loop only, which is how sessions never cross event loops. Work is handed over with
asyncio's ``run_coroutine_threadsafe``: cancelling the future it returns cancels the task on the
owner loop, whatever instant the cancel arrives (also just as the task finishes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

T = TypeVar("T")


class OwnerLoop:
    def __init__(self, name: str = "a0-reranker-owner") -> None:
        self._name = name
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None
        self._thread: threading.Thread | None = None
        self._running: set[asyncio.Task[Any]] = set()  # work handed over, still running (owner thread only)
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> OwnerLoop:
        self._portal = self._stack.enter_context(start_blocking_portal(backend="asyncio"))
        self.loop, self._thread = self._portal.call(_adopt, self._name)
        return self

    @property
    def alive(self) -> bool:
        return self._portal is not None and self._thread is not None and self._thread.is_alive()

    def is_current_thread(self) -> bool:
        return self._thread is not None and threading.get_ident() == self._thread.ident

    def submit(self, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> concurrent.futures.Future[T]:
        """Start ``func(*args)`` on the owner loop; cancelling the returned future cancels the task."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(self._tracked(func(*args)), self.loop)

    async def _tracked(self, work: Coroutine[Any, Any, T]) -> T:
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        try:
            return await work
        finally:
            self._running.discard(task)

    async def cancel_running(self, wait_s: float) -> None:
        """Cancel the work handed over that still runs (its caller was interrupted while it waited, say)
        and give it up to ``wait_s`` to unwind: run on the owner loop before its resources close, so that no
        request left behind opens a new HTTP session after the old one closed."""
        tasks = [task for task in self._running if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=wait_s)

    def call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``func(*args)`` on the owner loop and block for its result (never from the owner thread)."""
        assert self._portal is not None
        return self._portal.call(func, *args)

    def stop(self) -> None:
        """Stop the loop (tasks still running are cancelled); safe to call twice or from atexit."""
        if self._portal is None:
            return
        self._portal = None
        with contextlib.suppress(RuntimeError):  # the portal is already shut
            self._stack.close()


async def _adopt(name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """Name the portal's thread ours, and say which loop and thread it is."""
    thread = threading.current_thread()
    thread.name = name
    return asyncio.get_running_loop(), thread
