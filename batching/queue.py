"""What waits in a batcher: a caller's job (query, documents, deadline, future) in the queue of unsent
pairs, then the plans taken from it (one HTTP request each) for a slot of their endpoint.

``take`` is the coalescing rule. When one request may mix queries (vLLM ``/score``) it takes pairs
from the oldest jobs on, whatever their query; otherwise it takes the oldest job's query and every
queued job with that same query. Identical (query, document) pairs are sent once and routed to every
job waiting for them. A job larger than one request is split over several.

The queue owns the unsent pairs: only ``take``, ``discard`` and ``drain`` change a job's ``unsent``, and the
queued-pairs figure is derived from the jobs actually queued, so it cannot drift on any path.

An endpoint's slots (``EndpointLimiter``, shared by its batchers) are ``Lease``s that know their holder:
giving back one the limiter does not hold (twice, or another limiter's) raises ``SlotNotHeld`` instead
of silently freeing a slot someone else holds (as anyio's ``CapacityLimiter`` does). The dispatcher
takes a lease, then hands it to the request it starts (``hand_to``), whose task gives it back in a done
callback: that runs even when the task is cancelled before its first step, where a ``finally`` inside
the coroutine would not. A hedge or a failover asks with priority: the next free slot is its.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core import deadline as clock
from ..core.dialects import ScoreBatch

if TYPE_CHECKING:  # a replica's endpoint state imports this module
    from .endpoint_state import Replica

PairKey = tuple[str, str]


@dataclass(eq=False)
class Job:
    """Scores for ``documents`` against ``query``, due by ``deadline`` (on the engine's clock, ``deadline.now``).

    ``unsent`` holds the distinct documents not yet taken into a request (only the queue changes it);
    ``targets`` maps each distinct document to every position it fills (a recall may hold the same
    text twice). ``retries`` is the most retries any request carrying its pairs needed.
    """

    query: str
    documents: Sequence[str]
    deadline: float
    future: asyncio.Future[list[float]]
    enqueued_at: float = field(default_factory=clock.now)
    plans: set[Plan] = field(default_factory=set)
    retries: int = 0
    answered_by: str = ""  # the replica whose answer came first (its route says the API and the scale)
    failover_to: str = ""  # a replica other than the first one tried answered (a failover)
    sent: bool = False  # a request carrying some of its pairs has gone out

    def __post_init__(self) -> None:
        positions: dict[str, list[int]] = {}
        for index, doc in enumerate(self.documents):
            positions.setdefault(doc, []).append(index)
        self.targets: dict[str, list[int]] = positions
        self.unsent: list[str] = list(positions)  # distinct documents, in first-seen order
        self.scores: list[float | None] = [None] * len(self.documents)
        self.missing = len(positions)

    @property
    def done(self) -> bool:
        return self.future.done()

    def deliver(self, document: str, score: float) -> None:
        """Record the score of one distinct document; complete the future when all have arrived."""
        if self.done or document not in self.targets:
            return
        for index in self.targets.pop(document):
            self.scores[index] = score
        self.missing -= 1
        if self.missing == 0:
            self.future.set_result([s for s in self.scores if s is not None])

    def fail(self, error: BaseException) -> None:
        """Complete with an error unless already complete (the queue forgets its unsent pairs)."""
        if not self.done:
            self.future.set_exception(error)
            # The exception is always either awaited by the caller or deliberately dropped with it.
            self.future.exception()


@dataclass(eq=False)
class Plan:
    """One HTTP request: the batch to send and, for each pair, the jobs its score goes to."""

    batch: ScoreBatch
    routes: dict[PairKey, list[Job]]
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    retries: int = 0
    replica: Replica | None = field(default=None, repr=False)  # whose concurrency slot the request holds
    lease: Lease | None = field(default=None, repr=False)  # that slot
    first_replica: str = ""
    answered_by: str = ""  # the replica that answered
    abandoned_at_deadline: bool = False  # the last waiter left because its deadline passed
    sent: bool = False  # its first attempt went out
    _abandoned: bool = field(default=False, repr=False)

    @property
    def jobs(self) -> set[Job]:
        return {job for waiting in self.routes.values() for job in waiting}

    @property
    def has_waiters(self) -> bool:
        return any(not job.done for job in self.jobs)

    @property
    def deadline(self) -> float:
        """The latest deadline among live waiters: the request is worth waiting for until then."""
        live = [job.deadline for job in self.jobs if not job.done]
        return max(live) if live else 0.0

    def deliver(self, scores: list[float]) -> None:
        for (query, document), score in zip(self._keys(), scores, strict=True):
            for job in self.routes[(query, document)]:
                job.retries = max(job.retries, self.retries)
                job.answered_by = job.answered_by or self.answered_by
                if self.answered_by != self.first_replica:
                    job.failover_to = job.failover_to or self.answered_by
                job.deliver(document, score)

    def abandon(self, *, at_deadline: bool) -> None:
        """Every waiter left: cancel the request (the first reason to abandon it is the one kept)."""
        if self._abandoned or self.task is None or self.task.done():
            return
        self._abandoned = True
        self.abandoned_at_deadline = at_deadline
        self.task.cancel()

    def _keys(self) -> list[PairKey]:
        return [(self.batch.queries[qi], doc) for qi, doc in self.batch.pairs]


class PendingQueue:
    """Jobs with unsent pairs, oldest first."""

    def __init__(self) -> None:
        self._jobs: list[Job] = []

    def __bool__(self) -> bool:
        return bool(self._jobs)

    @property
    def pairs(self) -> int:
        """Unsent pairs of the queued jobs, counted from the jobs themselves."""
        return sum(len(job.unsent) for job in self._jobs)

    @property
    def jobs(self) -> tuple[Job, ...]:
        """The queued jobs, oldest first (a copy: the caller may discard them as it goes)."""
        return tuple(self._jobs)

    def add(self, job: Job) -> None:
        if job.unsent:
            self._jobs.append(job)

    def discard(self, job: Job) -> None:
        """Forget a finished job's unsent pairs (deadline, cancellation or failure)."""
        if job in self._jobs:
            self._jobs.remove(job)
        job.unsent.clear()

    def drain(self) -> list[Job]:
        """Remove and return every queued job (shutdown, or a bug in the dispatcher)."""
        jobs, self._jobs = self._jobs, []
        for job in jobs:
            job.unsent.clear()
        return jobs

    def take(self, *, max_pairs: int, mixes_queries: bool, share: float | None = None) -> Plan | None:
        """Remove up to ``max_pairs`` distinct pairs for one request, or None when nothing is queued.
        With ``share``, take whole jobs while they fit and then the part of the next one that fills the
        share, so that replicas sharing a burst out finish together (a recall split at a share's edge
        waits for two replicas that finish about together); a first job larger than the share is taken
        whole, so a lone recall is never split."""
        if not self._jobs:
            return None
        first_query = self._jobs[0].query
        queries: dict[str, int] = {}
        pairs: list[tuple[int, str]] = []
        routes: dict[PairKey, list[Job]] = {}
        for job in list(self._jobs):
            if not mixes_queries and job.query != first_query:
                continue
            limit = max_pairs
            if share is not None and pairs and len(pairs) + len(job.unsent) > share:
                limit = min(max_pairs, round(share))
                if len(pairs) >= limit:
                    break
            taken = 0
            for document in job.unsent:
                key = (job.query, document)
                if key not in routes:
                    if len(pairs) >= limit:
                        break
                    qi = queries.setdefault(job.query, len(queries))
                    pairs.append((qi, document))
                    routes[key] = []
                routes[key].append(job)
                taken += 1
            del job.unsent[:taken]
            if not job.unsent:
                self._jobs.remove(job)
            if len(pairs) >= limit and job.unsent:
                break
        batch = ScoreBatch(queries=tuple(queries), pairs=tuple(pairs))
        return Plan(batch=batch, routes=routes)


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
    """At most ``capacity`` requests in flight to one endpoint; ``in_flight`` is the leases out."""

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
        return self.in_flight < self._capacity and all(w.done() for w, _ in self._waiters)

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
        (self._waiters.appendleft if priority else self._waiters.append)(entry)
        try:
            await waiter  # resolved only together with taking the slot for us (see release)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                entry[1].release()  # granted as we were cancelled: give it back
            raise
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)
        return entry[1]

    def release(self, lease: Lease) -> None:
        """Give ``lease`` back and hand free slots to the waiters in order, each taken in the same step."""
        if lease not in self._leases:
            raise SlotNotHeld(f"a slot was given back that is not held (by a {type(lease.holder).__name__})")
        self._leases.remove(lease)
        while self._waiters and self.in_flight < self._capacity:
            waiter, granted = self._waiters.popleft()
            if not waiter.done():
                self._leases.add(granted)
                waiter.set_result(None)
