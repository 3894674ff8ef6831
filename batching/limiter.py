"""Concurrency slots per endpoint, and whether anything is in flight (the batch window's trigger).

A slot belongs to one request task from the moment the dispatcher takes it; the task gives it back
in a done callback, which runs even when the task is cancelled before its first step (a ``finally``
inside the coroutine would not). A hedge or a failover asks with priority: the next free slot is
its. ``acquire_any`` waits for the first free slot of several endpoints (replicas of one model).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence


class _Waiter:
    """One caller waiting for a slot of any of several limiters; the first with room grants it."""

    __slots__ = ("future",)

    def __init__(self) -> None:
        self.future: asyncio.Future[EndpointLimiter] = asyncio.get_running_loop().create_future()


class EndpointLimiter:
    """At most ``capacity`` requests in flight to one endpoint; the capacity may change between calls."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._in_flight = 0
        self._waiters: deque[_Waiter] = deque()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def capacity(self) -> int:
        return self._capacity

    def has_room(self) -> bool:
        """A slot is free and nobody queued before us wants it."""
        return self._in_flight < self._capacity and not any(not w.future.done() for w in self._waiters)

    def take(self) -> None:
        self._in_flight += 1

    def resize(self, capacity: int) -> None:
        self._capacity = capacity
        self._wake()

    async def acquire(self, *, priority: bool = False) -> None:
        """Wait for a slot and take it. Cancelled while waiting, it takes nothing."""
        await acquire_any([self], priority=priority)

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _enqueue(self, waiter: _Waiter, priority: bool) -> None:
        if priority:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)

    def _forget(self, waiter: _Waiter) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)

    def _wake(self) -> None:
        """Hand free slots to waiters in order; a slot is taken in the same step it is handed over."""
        while self._waiters and self._in_flight < self._capacity:
            waiter = self._waiters.popleft()
            if not waiter.future.done():
                self._in_flight += 1
                waiter.future.set_result(self)


async def acquire_any(limiters: Sequence[EndpointLimiter], *, priority: bool = False) -> EndpointLimiter:
    """Take a slot of the first of ``limiters`` to have one free, and say which. Cancelled while
    waiting it takes nothing, also when a slot was handed over in the same instant."""
    for limiter in limiters:
        if limiter.has_room():
            limiter.take()
            return limiter
    waiter = _Waiter()
    for limiter in limiters:
        limiter._enqueue(waiter, priority)
    try:
        return await waiter.future
    except asyncio.CancelledError:
        if waiter.future.done() and not waiter.future.cancelled():
            waiter.future.result().release()  # granted as we were cancelled: give it back
        raise
    finally:
        for limiter in limiters:
            limiter._forget(waiter)
