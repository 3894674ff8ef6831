"""The micro-batcher: coalesce concurrent scoring jobs into few HTTP requests under a cap and deadlines.

Flush rule: the dispatcher takes a concurrency slot first, then drains the queue. When nothing else
is in flight it sends at once, so a lone recall pays no window. When other requests are in flight it
waits up to ``window`` seconds, counted from the enqueue time of the oldest queued job, for more
jobs to join (it stops early once a request's worth of pairs is queued). Under load, jobs pile up
while slots are busy, so batches grow by themselves.

Every caller owns its deadline: at expiry its future fails at once, its unsent pairs leave the queue,
and a request whose last waiter left is cancelled. Whatever fails inside, every waiting future is
completed (the dispatcher is a supervisor boundary); a full queue refuses at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from ..core.dialects import ScoreBatch
from ..core.errors import (
    DeadlineExceeded,
    InputTooLong,
    MalformedAnswer,
    Overloaded,
    RerankError,
)
from ..core.statistics import StatsRecorder
from .breaker import CircuitBreaker
from .jobs import Job
from .limiter import EndpointLimiter
from .plans import PendingQueue, Plan

SendFn = Callable[[ScoreBatch, float], Awaitable[list[float]]]


class MicroBatcher:
    """Scores jobs for one route (endpoint + dialect + model) through ``send``; lives on one event loop.

    It reports each request's outcome to the endpoint's circuit breaker; admitting a call past the
    breaker is the caller's decision (the service asks once per rerank, detection included).
    """

    def __init__(
        self,
        send: SendFn,
        *,
        limiter: EndpointLimiter,
        breaker: CircuitBreaker,
        stats: StatsRecorder,
        mixes_queries: bool,
        max_pairs: int,
        window: float,
        max_queued_pairs: int,
    ) -> None:
        self._send = send
        self._limiter = limiter
        self._breaker = breaker
        self._stats = stats
        self._mixes_queries = mixes_queries
        self._max_pairs = max_pairs
        self._window = window
        self._max_queued_pairs = max_queued_pairs
        self._queue = PendingQueue()
        self._arrived = asyncio.Event()
        self._plans: set[Plan] = set()
        self._dispatcher: asyncio.Task[None] | None = None
        self._closed = False

    def configure(self, *, max_pairs: int, window: float, max_queued_pairs: int) -> None:
        self._max_pairs = max_pairs
        self._window = window
        self._max_queued_pairs = max_queued_pairs

    @property
    def queued_pairs(self) -> int:
        return self._queue.pairs

    @property
    def in_flight(self) -> int:
        return len(self._plans)

    async def score(self, query: str, documents: Sequence[str], deadline: float) -> list[float]:
        """One score per document, in order. Raises a ``RerankError`` naming why it could not."""
        if not documents:
            return []
        loop = asyncio.get_running_loop()
        if self._closed:
            raise RerankError("the batcher is closed")
        if deadline <= loop.time():
            raise DeadlineExceeded("the deadline passed before the request was queued")
        if self._queue.pairs + len(set(documents)) > self._max_queued_pairs:
            raise Overloaded(f"more than {self._max_queued_pairs} pairs are already waiting")
        job = Job(query=query, documents=documents, deadline=deadline, future=loop.create_future())
        self._queue.add(job)
        self._arrived.set()
        self._ensure_dispatcher()
        timer = loop.call_at(deadline, self._expire, job)
        try:
            return await job.future
        finally:
            timer.cancel()
            self._finish(job)

    async def close(self) -> None:
        """Fail everything still waiting and stop the dispatcher."""
        self._closed = True
        error = RerankError("the reranker is shutting down")
        for plan in list(self._plans):
            self._fail_jobs(plan.jobs, error)
            if plan.task:
                plan.task.cancel()
        self._fail_queued(error)
        if self._dispatcher:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher

    # --- caller side -------------------------------------------------------------------------

    def _expire(self, job: Job) -> None:
        job.expired = True
        job.fail(DeadlineExceeded("no answer before the deadline"))
        self._finish(job)

    def _finish(self, job: Job) -> None:
        """A job ended (result, error, deadline or cancellation): drop its unsent pairs and orphan requests."""
        self._queue.discard(job)
        for plan in list(job.plans):
            if not plan.has_waiters and plan.task and not plan.task.done():
                plan.task.cancel()

    # --- dispatcher --------------------------------------------------------------------------

    def _ensure_dispatcher(self) -> None:
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch())

    async def _dispatch(self) -> None:
        while not self._closed:
            try:
                await self._dispatch_one()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # supervisor boundary: a bug here must not strand any caller
                self._fail_queued(RerankError(f"internal batching error: {exc!r}"))

    async def _dispatch_one(self) -> None:
        while not self._queue:
            self._arrived.clear()
            await self._arrived.wait()
        await self._limiter.acquire()
        started = False
        try:
            if self._limiter.in_flight > 1:
                await self._wait_for_company()
            plan = self._queue.take(max_pairs=self._max_pairs, mixes_queries=self._mixes_queries)
            if plan is not None:
                for job in plan.jobs:
                    job.plans.add(plan)
                self._plans.add(plan)
                plan.task = asyncio.get_running_loop().create_task(self._send_plan(plan))
                started = True
        finally:
            if not started:
                self._limiter.release()

    async def _wait_for_company(self) -> None:
        """Other requests are in flight: give more jobs until the window closes to join this one."""
        oldest = self._queue.oldest_enqueued_at
        if oldest is None:
            return
        closes_at = oldest + self._window
        loop = asyncio.get_running_loop()
        while self._queue and self._queue.pairs < self._max_pairs:
            remaining = closes_at - loop.time()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return

    async def _send_plan(self, plan: Plan) -> None:
        try:
            self._stats.request_sent(len(plan.batch))
            scores = await self._send(plan.batch, plan.deadline)
            if len(scores) != len(plan.batch):
                raise MalformedAnswer(f"expected {len(plan.batch)} scores, got {len(scores)}")
            self._breaker.record_success()
            plan.deliver(scores)
        except asyncio.CancelledError:
            # Every waiter left. If one left because its deadline passed, the server was too slow.
            if any(job.expired for job in plan.jobs):
                self._breaker.record_failure()
            else:
                self._breaker.release_probe()
            self._fail_jobs(plan.jobs, DeadlineExceeded("no answer before the deadline"))
        except InputTooLong as exc:
            self._breaker.release_probe()
            self._fail_jobs(plan.jobs, exc)
        except RerankError as exc:
            self._breaker.record_failure()
            self._fail_jobs(plan.jobs, exc)
        except Exception as exc:  # a bug in send or parse: fail the waiters, never strand them
            self._breaker.record_failure()
            self._fail_jobs(plan.jobs, RerankError(f"unexpected error: {exc!r}"))
        finally:
            self._limiter.release()
            self._plans.discard(plan)
            for job in plan.jobs:
                job.plans.discard(plan)
            self._arrived.set()  # a slot is free: let the dispatcher look again

    def _fail_jobs(self, jobs: set[Job], error: BaseException) -> None:
        for job in jobs:
            if not job.done:
                job.fail(error)
            self._finish(job)

    def _fail_queued(self, error: BaseException) -> None:
        while (plan := self._queue.take(max_pairs=1 << 30, mixes_queries=True)) is not None:
            self._fail_jobs(plan.jobs, error)
