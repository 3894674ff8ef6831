"""Concurrency slots per endpoint, and whether anything is in flight (the batch window's trigger).

A slot belongs to one request task from the moment the dispatcher takes it; the task gives it back
in a done callback, which runs even when the task is cancelled before its first step (a ``finally``
inside the coroutine would not). A hedge or a failover asks with priority: the next free slot is
its.
"""

from __future__ import annotations

import asyncio
from collections import deque


class EndpointLimiter:
    """At most ``capacity`` requests in flight to one endpoint; the capacity may change between calls."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def capacity(self) -> int:
        return self._capacity

    def has_room(self) -> bool:
        """A slot is free and nobody queued before us wants it."""
        return self._in_flight < self._capacity and not any(not w.done() for w in self._waiters)

    def take(self) -> None:
        self._in_flight += 1

    def resize(self, capacity: int) -> None:
        self._capacity = capacity
        self._wake()

    async def acquire(self, *, priority: bool = False) -> None:
        """Wait for a slot and take it. Cancelled while waiting it takes nothing, also when a slot was
        handed over in the same instant."""
        if self.has_room():
            self.take()
            return
        waiter = asyncio.get_running_loop().create_future()
        if priority:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)
        try:
            await waiter  # resolved only together with taking the slot for us (see _wake)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # granted as we were cancelled: give it back
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        """Hand free slots to waiters in order; a slot is taken in the same step it is handed over."""
        while self._waiters and self._in_flight < self._capacity:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._in_flight += 1
                waiter.set_result(None)
