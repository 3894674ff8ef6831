"""A0 `helpers/defer.py`: named event-loop threads and `DeferredTask`.

`EventLoopThread` is a singleton per thread name ("AgentContext", "Background", ...), each with its
own loop. `DeferredTask.start_task` schedules a coroutine there with
`asyncio.run_coroutine_threadsafe`, which copies the caller's ContextVars into the new task, exactly
as in A0 (so a scope still set when memorize starts leaks into the Background thread).
Stand-in additions for tests: `wait_for_deferred()` and `shutdown_all()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, ClassVar

THREAD_BACKGROUND = "Background"

_pending_lock = threading.Lock()
_pending: set[Future[Any]] = set()


class EventLoopThread:
    _instances: ClassVar[dict[str, EventLoopThread]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __new__(cls, thread_name: str = THREAD_BACKGROUND) -> EventLoopThread:
        with cls._lock:
            if thread_name not in cls._instances:
                instance = super().__new__(cls)
                instance.thread_name = thread_name
                instance.loop = None
                instance.thread = None
                cls._instances[thread_name] = instance
            return cls._instances[thread_name]

    def __init__(self, thread_name: str = THREAD_BACKGROUND) -> None:
        self.thread_name: str = thread_name
        self.loop: asyncio.AbstractEventLoop | None
        self.thread: threading.Thread | None
        self._start()

    def _start(self) -> None:
        with self._lock:
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True, name=self.thread_name)
                self.thread.start()

    def _run(self) -> None:
        assert self.loop is not None
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run_coroutine(self, coro: Coroutine[Any, Any, Any]) -> Future[Any]:
        self._start()
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def terminate(self) -> None:
        """Cancel what still runs on the loop, stop it and close it."""
        loop, thread = self.loop, self.thread
        if loop is not None and thread is not None and thread.is_alive():
            if thread is not threading.current_thread():
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(_drain(), loop).result(timeout=5)
            loop.call_soon_threadsafe(loop.stop)
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        if loop is not None and not loop.is_running() and not loop.is_closed():
            loop.close()
        with self._lock:
            if self._instances.get(self.thread_name) is self:
                del self._instances[self.thread_name]
        self.loop = None
        self.thread = None


class DeferredTask:
    def __init__(self, thread_name: str = THREAD_BACKGROUND) -> None:
        self.event_loop_thread = EventLoopThread(thread_name)
        self._future: Future[Any] | None = None

    def start_task(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any, **kwargs: Any) -> DeferredTask:
        self.func, self.args, self.kwargs = func, args, kwargs
        self._future = self.event_loop_thread.run_coroutine(self._run())
        with _pending_lock:
            _pending.add(self._future)
        self._future.add_done_callback(_forget)
        return self

    async def _run(self) -> Any:
        return await self.func(*self.args, **self.kwargs)

    def is_ready(self) -> bool:
        return self._future.done() if self._future else False

    def is_alive(self) -> bool:
        return bool(self._future and not self._future.done())

    def result_sync(self, timeout: float | None = None) -> Any:
        if not self._future:
            raise RuntimeError("Task hasn't been started")
        return self._future.result(timeout)

    async def result(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - A0's signature
        if not self._future:
            raise RuntimeError("Task hasn't been started")
        return await asyncio.wait_for(asyncio.wrap_future(self._future), timeout)

    def kill(self, terminate_thread: bool = False) -> None:
        if self._future and not self._future.done():
            self._future.cancel()
        if terminate_thread:
            self.event_loop_thread.terminate()


async def _drain() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _forget(future: Future[Any]) -> None:
    with _pending_lock:
        _pending.discard(future)


def wait_for_deferred(timeout: float = 10.0) -> None:
    """Stand-in: block until every started `DeferredTask` is done. Their errors are not raised
    here (A0 logs them); a test that wants one calls `result_sync()` on its own task."""
    while True:
        with _pending_lock:
            pending = list(_pending)
        if not pending:
            return
        for future in pending:
            try:
                future.exception(timeout)
            except FutureTimeout:
                raise TimeoutError("deferred task still running") from None
            except CancelledError:
                continue


def shutdown_all() -> None:
    """Stand-in: cancel pending tasks and stop every named loop thread (test teardown)."""
    with _pending_lock:
        pending = list(_pending)
    for future in pending:
        future.cancel()
    for instance in list(EventLoopThread._instances.values()):
        instance.terminate()
