"""An event loop on a virtual clock: time moves only when the loop would otherwise wait, by exactly as
long as it would have waited, so an hour's cooldown passes at once and every timer fires in order.

The engine reads one clock (``core.deadline.now``: the running loop's time), so on this loop its
breaker cooldowns, retry budget, backoff, Retry-After waits, hedge delays and deadlines all follow
the virtual clock together. Only for code that does no real I/O: a socket would never be waited for.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("deadlock: nothing is scheduled and nothing can arrive")
        self._loop.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 1000.0
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self.now


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
