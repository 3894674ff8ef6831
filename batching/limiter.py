"""Concurrency slots per endpoint, as leases that know their holder.

Each slot taken is a ``Lease``: the limiter keeps the leases it has out, ``in_flight`` is their number,
and giving back a lease it does not hold (twice, or one of another limiter) raises ``SlotNotHeld``
instead of silently freeing a slot someone else holds (as in anyio's ``CapacityLimiter``, whose
release on behalf of a borrower that holds nothing raises). A lease passes from holder to holder
(``hand_to``): the dispatcher takes one, then gives it to the request it starts. The request's task
gives it back in a done callback, which runs even when the task is cancelled before its first step
(a ``finally`` inside the coroutine would not). A hedge or a failover asks with priority: the next
free slot is its.
"""

from __future__ import annotations

import asyncio
from collections import deque


class SlotNotHeld(RuntimeError):
    """A lease was given back that the limiter does not hold: a bug in whoever gave it back."""


class Lease:
    """One slot of one limiter, held by ``holder`` until given back."""

    __slots__ = ("_limiter", "holder")

    def __init__(self, limiter: EndpointLimiter, holder: object) -> None:
        self._limiter = limiter
        self.holder = holder

    @property
    def held(self) -> bool:
        return self in self._limiter._leases

    def hand_to(self, holder: object) -> Lease:
        """The same slot, now held by ``holder``."""
        if not self.held:
            raise SlotNotHeld(f"cannot hand over a slot that is not held (held by a {type(self.holder).__name__})")
        self.holder = holder
        return self

    def release(self) -> None:
        self._limiter.release(self)


class EndpointLimiter:
    """At most ``capacity`` requests in flight to one endpoint."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._leases: set[Lease] = set()
        self._waiters: deque[tuple[asyncio.Future[None], Lease]] = deque()

    @property
    def in_flight(self) -> int:
        return len(self._leases)

    @property
    def capacity(self) -> int:
        return self._capacity

    def has_room(self) -> bool:
        """A slot is free and nobody queued before us wants it."""
        return self.in_flight < self._capacity and not any(not w.done() for w, _ in self._waiters)

    def take(self, holder: object) -> Lease:
        """A slot at once, for ``holder`` (the caller has checked ``has_room``, or must have one)."""
        lease = Lease(self, holder)
        self._leases.add(lease)
        return lease

    async def acquire(self, holder: object, *, priority: bool = False) -> Lease:
        """Wait for a slot and take it for ``holder``. Cancelled while waiting it takes nothing, also
        when a slot was handed over in the same instant."""
        if self.has_room():
            return self.take(holder)
        waiter = asyncio.get_running_loop().create_future()
        entry = (waiter, Lease(self, holder))
        if priority:
            self._waiters.appendleft(entry)
        else:
            self._waiters.append(entry)
        try:
            await waiter  # resolved only together with taking the slot for us (see _wake)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                entry[1].release()  # granted as we were cancelled: give it back
            raise
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)
        return entry[1]

    def release(self, lease: Lease) -> None:
        if lease not in self._leases:
            raise SlotNotHeld(f"a slot was given back that is not held (by a {type(lease.holder).__name__})")
        self._leases.remove(lease)
        self._wake()

    def _wake(self) -> None:
        """Hand free slots to waiters in order; a slot is taken in the same step it is handed over."""
        while self._waiters and self.in_flight < self._capacity:
            waiter, lease = self._waiters.popleft()
            if not waiter.done():
                self._leases.add(lease)
                waiter.set_result(None)
