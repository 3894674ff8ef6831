"""What is one per process, and the owner loop (the one daemon thread that runs our asyncio work).

A0 drops every ``usr.plugins.*`` module when a plugin changes, which would split a module global in two (the
memory wrapper reading the old copy, fresh extensions writing the new): each such object lives in one anchor
module named outside ``usr.plugins``, which a forked child finds empty. Standard library only at import:
uninstall uses ``PerProcess`` (``a0_hooks.memory_patch``) and must work when our dependencies do not.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import sys
import threading
import types
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

ANCHOR_MODULE: Final = "_a0_reranker_process_state"
OWNER_THREAD: Final = "a0-reranker-owner"
CANCEL_WAIT_S: Final = 2.0  # on stop, what work still running gets to unwind, and each closer to close
T = TypeVar("T")
log = logging.getLogger("a0_reranker")


class _Anchor(types.ModuleType):
    def __init__(self) -> None:
        super().__init__(ANCHOR_MODULE, "a0_reranker's process-wide state (see process/singletons.py)")
        self.generation = 0  # of the code: ``forget_all`` retires the copies imported before it (kept by ``reset``)
        self.stops_at_exit = False  # the one exit hook is registered (kept by ``reset``: a forked child inherits it)
        self.reset()

    def reset(self) -> None:
        if hasattr(self, "owners"):  # a forked child: what the parent started is kept, never run nor collected here.
            # Collected, its portal would wait for an owner thread the child lacks (for ever, inside ``os.fork``),
            # and its sockets would leave the epoll set both processes share, stalling the parent's requests.
            self.inherited = [*getattr(self, "inherited", ()), (self.values, self.owners)]
        self.lock = threading.RLock()
        self.values: dict[str, object] = {}
        self.owners: set[OwnerLoop] = set()  # started and not yet stopped, of any copy: the exit hook stops these
        self.pid = os.getpid()


def _anchor() -> _Anchor:
    module = sys.modules.get(ANCHOR_MODULE)
    if module is None:
        fresh = _Anchor()
        module = sys.modules.setdefault(ANCHOR_MODULE, fresh)  # atomic: one anchor even if threads race
        if module is fresh and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=fresh.reset)
    anchor = cast(_Anchor, module)  # made by this module or by an earlier copy of it (the same shape)
    if anchor.pid != os.getpid():  # forked without the at-fork hook having run
        anchor.reset()
    return anchor


def forget_all() -> dict[str, object]:
    """Drop every object and retire the code imported so far (update, uninstall): new code must not use the old
    classes' objects, nor a recall still running in the old code make new ones. Returns what it dropped."""
    anchor = _anchor()
    with anchor.lock:
        dropped = dict(anchor.values)
        anchor.values.clear()
        anchor.generation = _generation(anchor) + 1
    return dropped


def _generation(anchor: _Anchor) -> int:
    return getattr(anchor, "generation", 0)  # an anchor made by a version before generations counts as 0


_BORN = _generation(_anchor())  # the generation this copy of the code was imported in


def retired() -> bool:
    """An update replaced this copy of the code: it keeps nothing process-wide and starts nothing."""
    return _generation(_anchor()) != _BORN


def _store() -> tuple[threading.RLock, dict[str, object]]:
    anchor = _anchor()
    return anchor.lock, anchor.values if _generation(anchor) == _BORN else {}


class PerProcess(Generic[T]):
    """One process-wide object of type ``T``, made by ``factory`` on first use."""

    def __init__(self, name: str, factory: Callable[[], T]) -> None:
        self.name = name
        self._factory = factory

    def get(self, factory: Callable[[], T] | None = None) -> T:
        lock, values = _store()
        with lock:
            if self.name not in values:
                values[self.name] = (factory or self._factory)()
            return cast(T, values[self.name])

    def peek(self) -> T | None:
        lock, values = _store()
        with lock:
            return cast("T | None", values.get(self.name))

    def discard(self) -> T | None:
        lock, values = _store()
        with lock:
            return cast("T | None", values.pop(self.name, None))


def _live_owners() -> set[OwnerLoop]:
    """The owner loops running (a retired copy's too): one exit hook a process, as one per runtime kept every
    runtime ever started (an update each) until exit."""
    anchor = _anchor()
    with anchor.lock:
        if not getattr(anchor, "stops_at_exit", False):  # an anchor of an older version has no such flag
            anchor.stops_at_exit = True
            atexit.register(_stop_live_owners)
        return cast("set[OwnerLoop]", anchor.__dict__.setdefault("owners", set()))  # none in an older anchor


def _stop_live_owners() -> None:
    for owner in list(_live_owners()):
        owner.stop()


class OwnerLoop:
    """One daemon thread running asyncio (anyio's blocking portal) until ``stop``, which runs the closers handed
    to ``close_with`` (the HTTP session) once, however and by whomever the loop is stopped."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None
        self._thread: threading.Thread | None = None
        self._running: set[asyncio.Task[Any]] = set()  # work handed over, still running (owner thread only)
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._stop_lock = threading.Lock()  # one ``stop`` at a time: a second finds the loop stopped
        self._stopping = False  # set once: work handed over from then on is cancelled, not started
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> OwnerLoop:
        from anyio.from_thread import start_blocking_portal

        try:
            self._portal = self._stack.enter_context(start_blocking_portal(backend="asyncio"))
            self.loop, self._thread = self._portal.call(_adopt, OWNER_THREAD)
        except BaseException:
            self._portal = None
            self._stack.close()  # a loop that cannot be adopted leaves no thread behind
            raise
        _live_owners().add(self)
        return self

    @property
    def alive(self) -> bool:
        return self._portal is not None and self._thread is not None and self._thread.is_alive()

    def is_current_thread(self) -> bool:
        return self._thread is not None and threading.get_ident() == self._thread.ident

    def submit(self, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> concurrent.futures.Future[T]:
        """Cancelling the future cancels the task, whenever the cancel arrives; once ``stop`` began, it comes back
        cancelled, as work ``stop`` cancelled does (the caller reports it stopped)."""
        assert self.loop is not None
        if self._stopping:
            stopped: concurrent.futures.Future[T] = concurrent.futures.Future()
            stopped.cancel()
            return stopped
        return asyncio.run_coroutine_threadsafe(self._tracked(func, *args), self.loop)

    async def _tracked(self, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        if self._stopping:  # handed over just as ``stop`` began, to start after it cancelled what ran: none starts
            raise asyncio.CancelledError
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        try:
            return await func(*args)
        finally:
            self._running.discard(task)

    def call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Blocks for the result: never from the owner thread."""
        assert self._portal is not None
        return self._portal.call(func, *args)

    def close_with(self, closer: Callable[[], Awaitable[None]]) -> None:
        self._closers.append(closer)

    def stop(self) -> None:
        """Cancel the work running (none may open a session after the closers ran), run the closers, stop the loop.
        Safe twice, at once from two threads, or from atexit (the second returns once the first is done); not from
        the owner thread."""
        with self._stop_lock:
            _live_owners().discard(self)
            portal = self._portal
            if portal is None:
                return
            self._stopping = True
            if self.alive:
                for step in [lambda: cancel_and_wait(self._running), *self._closers]:
                    try:
                        portal.call(_bounded, step)
                    except Exception:  # stopping: nothing useful to do with the error but go on to the next step
                        log.debug("a0_reranker: error while stopping the owner loop", exc_info=True)
            self._portal = None
            with contextlib.suppress(RuntimeError):  # the portal is already shut
                self._stack.close()


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    running = [task for task in tasks if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running)


async def _bounded(step: Callable[[], Awaitable[None]]) -> None:
    """A stop step that hangs (a close stuck on a dead peer) must not hang the process's exit."""
    await asyncio.wait_for(step(), CANCEL_WAIT_S)


async def _adopt(name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    thread = threading.current_thread()
    thread.name = name
    return asyncio.get_running_loop(), thread
