"""How a command ends other than by success: the documented exit code and one line on stderr.

``CliError`` is a problem the user can fix, never a traceback: exit 2 (``USAGE``: bad arguments, URL, file, key
variable) or 1 (``FAILED``: the server is unreachable or answers wrongly). The first SIGINT (130) or SIGTERM (143)
prints its line at once and stops the command, which unwinds through its ``with`` blocks (inside ``run`` by
cancelling the main task, as ``asyncio.run`` does for Ctrl-C); a further signal exits at once with the first one's
code. Once every exit hook has run, signals are ignored: one arriving while Python restores the default handlers
would kill the process by the signal instead of the code."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any, Final, TypeVar

T = TypeVar("T")

USAGE: Final = 2
FAILED: Final = 1
SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
_WORDS: Final[dict[int, str]] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class CliError(Exception):
    """A problem the user can fix; ``exit_code`` is USAGE or FAILED."""

    def __init__(self, message: str, exit_code: int = USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Stopped(KeyboardInterrupt):
    """A signal stopped the command; ``exit_code`` is 128 + its number."""

    def __init__(self, signum: int) -> None:
        super().__init__(_WORDS.get(signum, "stopped"))
        self.exit_code = 128 + signum


@dataclass
class _State:
    command: str = ""
    received: Stopped | None = None
    announced: bool = False
    in_loop: bool = False  # ``run`` is running an event loop in the main thread
    task: asyncio.Task[Any] | None = None  # its main task, while it runs


_STATE = _State()


@atexit.register
def _ignore_signals_at_the_end() -> None:
    """The last exit hook (registered first): see the module docstring."""
    if _STATE.received is not None:
        for signum in SIGNALS:
            with contextlib.suppress(ValueError):  # not the main thread: nothing to protect
                signal.signal(signum, signal.SIG_IGN)


def stopping() -> bool:
    """Whether a signal has asked the command to stop (the progress bar then draws nothing more)."""
    return _STATE.received is not None


def name_command(command: str) -> None:
    """The name the stop line starts with (``a0-reranker probe``), once the arguments say which."""
    _STATE.command = command


def announce(stopped: Stopped) -> int:
    """Print the line once and return the exit code; on a terminal it starts a line of its own (after ``^C``)."""
    if not _STATE.announced:
        newline = "\n" if getattr(sys.stderr, "isatty", lambda: False)() else ""
        sys.stderr.write(f"{newline}{_STATE.command}: {stopped}\n")
        sys.stderr.flush()
        _STATE.announced = True  # only once written: a write that failed is tried again by the caller
    return stopped.exit_code


@contextlib.contextmanager
def stop_on_signals(command: str) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM stop it; after a signal the handlers stay."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _STATE.command, _STATE.received, _STATE.announced = command, None, False
    previous = {signum: signal.signal(signum, _first) for signum in SIGNALS}
    try:
        yield
    finally:
        if _STATE.received is None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def run(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)``; raises ``Stopped`` once the work has unwound if a signal came meanwhile."""
    _STATE.in_loop = True
    try:
        result = asyncio.run(_main(work))
    except asyncio.CancelledError:
        if _STATE.received is None:
            raise
        raise _STATE.received from None
    finally:
        _STATE.in_loop = False
    if _STATE.received is not None:  # it came while the loop closed, after the work was done
        raise _STATE.received
    return result


async def _main(work: Coroutine[Any, Any, T]) -> T:
    _STATE.task = asyncio.current_task()
    try:
        if _STATE.received is not None:  # it came while the loop started
            raise asyncio.CancelledError
        return await work
    finally:
        _STATE.task = None
        work.close()  # not awaited when cancelled before it started: no "never awaited" warning


def _first(signum: int, _frame: FrameType | None) -> None:
    """Say so at once (the clean-up may take a moment), then stop the command."""
    for other in SIGNALS:
        signal.signal(other, _again)
    _STATE.received = Stopped(signum)
    with contextlib.suppress(Exception):  # stderr may be mid-write in the main thread: then said after unwinding
        announce(_STATE.received)
    if not _STATE.in_loop:
        raise _STATE.received
    task = _STATE.task
    if task is not None and not task.done():
        task.cancel()
        task.get_loop().call_soon_threadsafe(lambda: None)  # wake the loop's select(), which PEP 475 would resume


def _again(_signum: int, _frame: FrameType | None) -> None:
    stopped = _STATE.received or Stopped(_signum)
    with contextlib.suppress(Exception):  # stdout may be mid-write in the main thread
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        announce(stopped)
    os._exit(stopped.exit_code)
