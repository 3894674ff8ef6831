"""Run a benchmark server in a child process, so its event loop never competes with the client's
for the GIL; the parent gets its URL and stops it on exit.

The parent alone decides when the child stops: the child ignores SIGINT and SIGTERM (a Ctrl-C or a
``timeout`` reaches the whole process group, the child included) and serves until its end of a pipe
to the parent reads end-of-file, which happens when the parent closes it or dies, however it dies.
There is no lock shared between the two: a child that is killed cannot leave the parent waiting on one.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any, Self

from aiohttp import web

AppFactory = Callable[..., web.Application]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
START_WAIT_S = 60.0


def _serve(build_app: AppFactory, args: tuple[Any, ...], parent: Connection) -> None:
    for signum in STOP_SIGNALS:  # the parent stops this server; a signal sent meanwhile is dropped
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    async def main() -> None:
        runner = web.AppRunner(build_app(*args), access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        parent.send(runner.addresses[0][1])
        await asyncio.to_thread(_until_closed, parent)
        await runner.cleanup()

    asyncio.run(main())


def _until_closed(parent: Connection) -> None:
    """Block until the parent's end of the pipe closes (nothing is ever sent this way)."""
    with contextlib.suppress(EOFError, OSError):
        parent.recv()


@contextlib.contextmanager
def _start_with_stop_signals_blocked() -> Iterator[None]:
    """Block SIGINT and SIGTERM in this thread while the child starts: it inherits the mask, so it cannot
    die of one before ``_serve`` ignores them. In this process a signal is only held back, never lost."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class ChildProcessServer:
    """Context manager: ``build_app(*args)`` (a module-level function) served on 127.0.0.1 in a child."""

    def __init__(self, build_app: AppFactory, *args: Any) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child_end = context.Pipe()
        self._process = context.Process(target=_serve, args=(build_app, args, child_end), daemon=True)
        self._child_end: Connection | None = child_end
        self.url = ""

    def __enter__(self) -> Self:
        try:
            with _start_with_stop_signals_blocked():
                self._process.start()
            self._close_child_end()  # the child holds it now: its exit reads as end-of-file here
            if not self._pipe.poll(START_WAIT_S):
                raise TimeoutError(f"no port within {START_WAIT_S:g} s")
            self.url = f"http://127.0.0.1:{self._pipe.recv()}"
        except BaseException:  # no port, the child died, or interrupted (Ctrl-C, SIGTERM): stop the child too
            self.__exit__()
            raise
        return self

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would: the system closes its listening socket
        and every connection, and later connections to its port are refused. Returns without waiting."""
        self._process.kill()

    def __exit__(self, *exc: object) -> None:
        self._close_child_end()
        self._pipe.close()  # the child reads end-of-file and stops serving
        if self._process.pid is None:  # never started
            return
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=5)

    def _close_child_end(self) -> None:
        if self._child_end is not None:
            self._child_end.close()
            self._child_end = None
