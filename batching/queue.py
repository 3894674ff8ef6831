"""What waits in a batcher: jobs' unsent pairs, the plans (one request each) ``take`` coalesces from them, and the
endpoint's slots they hold. The queue alone changes ``unsent``, so the queued-pairs figure cannot drift; a ``Lease``
knows its holder, so giving back one not held raises ``SlotNotHeld`` instead of freeing another's slot (as anyio's
``CapacityLimiter`` would). Both serve the earliest deadline first: agents whose ``rerank_timeout`` differs share
a server (with one timeout, that is first come, first served)."""

from __future__ import annotations

import asyncio
import bisect
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ..core import deadline as clock
from ..core.dialects import ScoreBatch

if TYPE_CHECKING:  # a replica's endpoint state imports this module
    from .endpoint_state import Replica

PairKey = tuple[str, str]


@dataclass(eq=False)
class Job:
    """Scores for ``documents`` against ``query``, due by ``deadline``. ``targets`` maps each distinct document
    to every position it fills (a recall may hold a text twice)."""

    query: str
    documents: Sequence[str]
    deadline: float
    future: asyncio.Future[list[float]]
    enqueued_at: float = field(default_factory=clock.now)
    plans: set[Plan] = field(default_factory=set)
    retries: int = 0  # the most any request carrying its pairs needed
    answered_by: str = ""  # the replica whose answer came first (its route says the API and the scale)
    failover_to: str = ""  # a replica other than the first one tried answered (a failover)
    sent: bool = False  # a request carrying some of its pairs has gone out

    def __post_init__(self) -> None:
        self.targets: dict[str, list[int]] = {}
        for index, doc in enumerate(self.documents):
            self.targets.setdefault(doc, []).append(index)
        self.unsent: list[str] = list(self.targets)  # distinct documents not yet taken, in first-seen order
        self.scores: list[float | None] = [None] * len(self.documents)

    @property
    def done(self) -> bool:
        return self.future.done()

    def deliver(self, document: str, score: float) -> None:
        if self.done or document not in self.targets:
            return
        for index in self.targets.pop(document):
            self.scores[index] = score
        if not self.targets:
            self.future.set_result([s for s in self.scores if s is not None])

    def fail(self, error: BaseException) -> None:
        if not self.done:
            self.future.set_exception(error)
            self.future.exception()  # awaited by the caller, or dropped with it: never "never retrieved"


@dataclass(eq=False)
class Plan:
    """One HTTP request: the batch to send and, for each pair, the jobs its score goes to."""

    batch: ScoreBatch
    routes: dict[PairKey, list[Job]]
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    retries: int = 0  # retries that went out; the fields from here on are the dispatch step's
    retry_unsent: str = ""  # the kind of a retry taken from the budget that has not gone out yet
    failover_unsent: bool = False  # moved to another replica, and not sent there yet
    replica: Replica | None = field(default=None, repr=False)  # whose slot it holds: ``lease``
    lease: Lease | None = field(default=None, repr=False)
    first_replica: str = ""  # where its first attempt went, and the replica that answered
    answered_by: str = ""
    abandoned_at_deadline: bool = False
    sent: bool = False  # its first attempt went out (the retry budget counts it then)
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
        return max((job.deadline for job in self.jobs if not job.done), default=0.0)

    def deliver(self, scores: list[float]) -> None:
        for (qi, document), score in zip(self.batch.pairs, scores, strict=True):
            for job in self.routes[(self.batch.queries[qi], document)]:
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


class PendingQueue:
    """Jobs with unsent pairs, earliest deadline first (in the order they came on a tie)."""

    def __init__(self) -> None:
        self._jobs: list[Job] = []

    def __bool__(self) -> bool:
        return bool(self._jobs)

    @property
    def pairs(self) -> int:
        return sum(len(job.unsent) for job in self._jobs)

    @property
    def jobs(self) -> tuple[Job, ...]:
        """A copy: the caller may discard them as it goes."""
        return tuple(self._jobs)

    def pairs_due_by(self, deadline: float) -> int:
        """The unsent pairs served before a recall due at ``deadline`` would be."""
        return sum(len(job.unsent) for job in self._jobs if job.deadline <= deadline)

    def most_urgent(self) -> float:
        """The deadline of the job served next (infinity when none waits)."""
        return self._jobs[0].deadline if self._jobs else math.inf

    def latest(self) -> float:
        """The deadline of the job served last (minus infinity when none waits)."""
        return self._jobs[-1].deadline if self._jobs else -math.inf

    def add(self, job: Job) -> None:
        if job.unsent:
            bisect.insort_right(self._jobs, job, key=lambda queued: queued.deadline)

    def discard(self, job: Job) -> None:
        """Forget a finished job's unsent pairs."""
        if job in self._jobs:
            self._jobs.remove(job)
        job.unsent.clear()

    def drain(self) -> list[Job]:
        jobs, self._jobs = self._jobs, []
        for job in jobs:
            job.unsent.clear()
        return jobs

    def take(self, *, max_pairs: int, mixes_queries: bool, share: float | None = None) -> Plan | None:
        """Up to ``max_pairs`` distinct pairs from the most urgent jobs on (of the first's query unless a request may
        mix queries), each once for all jobs waiting for it. With ``share``, whole jobs while they fit, then the part
        of the next that fills it; a first job larger than the share is taken whole (a lone recall is never split)."""
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
        return Plan(batch=ScoreBatch(queries=tuple(queries), pairs=tuple(pairs)), routes=routes)


class SlotNotHeld(RuntimeError):
    """A lease was given back that the limiter does not hold: a bug in whoever gave it back."""


@dataclass(eq=False, slots=True)
class Lease:
    _limiter: EndpointLimiter
    holder: object

    @property
    def held(self) -> bool:
        return self in self._limiter._leases

    def hand_to(self, holder: object) -> Lease:
        if not self.held:
            raise SlotNotHeld(f"cannot hand over a slot that is not held (held by a {type(self.holder).__name__})")
        self.holder = holder
        return self

    def release(self) -> None:
        self._limiter.release(self)


@dataclass(eq=False, slots=True)
class _Waiting:
    future: asyncio.Future[None]
    lease: Lease
    priority: bool
    due: Callable[[], float]  # read when a slot frees: the waiter's queue changes while it waits


class EndpointLimiter:
    """At most ``capacity`` requests in flight to one endpoint. A free slot goes to a hedge or a failover first (they
    ask with priority), else to the waiter whose most urgent recall is due soonest (the oldest on a tie)."""

    def __init__(self, capacity: int) -> None:
        self.capacity: Final = capacity
        self._leases: set[Lease] = set()
        self._waiters: deque[_Waiting] = deque()

    @property
    def in_flight(self) -> int:
        return len(self._leases)

    def has_room(self) -> bool:
        """A slot is free and nobody queued before us wants it."""
        return self.in_flight < self.capacity and all(w.future.done() for w in self._waiters)

    def take(self, holder: object) -> Lease:
        """A slot at once (the caller has checked ``has_room``)."""
        lease = Lease(self, holder)
        self._leases.add(lease)
        return lease

    async def acquire(self, holder: object, *, priority: bool = False,
                      due: Callable[[], float] = lambda: math.inf) -> Lease:
        """Wait for a slot and take it for ``holder``, whose most urgent recall is due at ``due()``. Cancelled
        while waiting it takes nothing, also when a slot was handed over in the same instant."""
        if self.has_room():
            return self.take(holder)
        waiter = asyncio.get_running_loop().create_future()
        entry = _Waiting(waiter, Lease(self, holder), priority, due)
        (self._waiters.appendleft if priority else self._waiters.append)(entry)
        try:
            await waiter  # resolved only together with taking the slot for us (see release)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                entry.lease.release()  # granted as we were cancelled: give it back
            raise
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)
        return entry.lease

    def release(self, lease: Lease) -> None:
        """Give ``lease`` back and hand free slots to the next waiters, each taken in the same step."""
        if lease not in self._leases:
            raise SlotNotHeld(f"a slot was given back that is not held (by a {type(lease.holder).__name__})")
        self._leases.remove(lease)
        while self._waiters and self.in_flight < self.capacity:  # the latest hedge or failover, else the most urgent
            entry = next((w for w in self._waiters if w.priority), None) or min(self._waiters, key=lambda w: w.due())
            self._waiters.remove(entry)
            if not entry.future.done():
                self._leases.add(entry.lease)
                entry.future.set_result(None)
