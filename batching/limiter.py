"""Concurrency slots per endpoint, and whether anything is in flight (the batch window's trigger)."""

from __future__ import annotations

import asyncio


class EndpointLimiter:
    """At most ``capacity`` requests in flight to one endpoint; the capacity may change between calls.

    ``release`` and ``resize`` are synchronous so that a cancelled task can give its slot back in a
    ``finally`` without awaiting.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._in_flight = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def capacity(self) -> int:
        return self._capacity

    def resize(self, capacity: int) -> None:
        self._capacity = capacity
        self._wake()

    async def acquire(self) -> None:
        while self._in_flight >= self._capacity:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._in_flight += 1

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
