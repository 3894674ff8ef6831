"""The micro-batcher: coalesces concurrent jobs into few requests under a cap and deadlines; owns the plans' tasks
and the dispatcher. A lone recall pays no window; under load batches grow by themselves. Whatever fails, every
waiting future is completed, and a request whose last waiter left is cancelled."""

from __future__ import annotations

import asyncio
import functools
import heapq
from collections.abc import Callable, Sequence

from ..core import deadline as clock
from ..core.config import BATCH_WINDOW_SHARE
from ..core.errors import BlankQuery, DeadlineExceeded, Overloaded, QueueFull, RerankError
from ..core.scores import RerankResult, ranked, sent_ranking
from .dispatch import Dispatch
from .endpoint_state import PIPELINE_DEPTH, SEND_MARGIN, Replica, admits, shed_message, worth_sending
from .queue import Job, Lease, PendingQueue, Plan


class MicroBatcher:
    """Scores jobs for one route (endpoint + dialect + model) through ``dispatch``; lives on one event loop."""

    def __init__(self, dispatch: Dispatch, *, mixes_queries: bool, max_pairs: int, window: float,
                 max_queued_pairs: int, shed: bool = True, on_idle: Callable[[], None] = lambda: None) -> None:
        self.dispatch = dispatch
        self._on_idle = on_idle  # its owner keeps the number of batchers bounded as they go idle
        self._slots = dispatch.replicas
        self._mixes_queries = mixes_queries
        self._max_pairs = max_pairs
        self._window = window
        self._max_queued_pairs = max_queued_pairs
        self._shed = shed
        self._queue = PendingQueue()
        for replica in dispatch.replicas.replicas:
            replica.state.queued_by(self._queue)
        self._arrived = asyncio.Event()
        self._plans: set[Plan] = set()
        self._dispatcher: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def queued_pairs(self) -> int:
        return self._queue.pairs

    @property
    def in_flight(self) -> int:
        return len(self._plans)

    @property
    def idle(self) -> bool:
        """Nothing queued, nothing in flight, no dispatcher: safe to forget."""
        return not self._queue and not self._plans and (self._dispatcher is None or self._dispatcher.done())

    async def score(self, query: str, documents: Sequence[str], deadline: float) -> RerankResult:
        """The documents ranked by their scores, and how the requests went; or a ``RerankError`` saying why not."""
        if not documents:
            return RerankResult([])
        if not query.strip():
            raise BlankQuery("the query is blank (empty or whitespace only): nothing to rank against")
        sent = [i for i, text in enumerate(documents) if text.strip()]
        if len(sent) < len(documents):  # a blank text is never sent (SGLang refuses the request, others' recalls too)
            return sent_ranking(await self.score(query, [documents[i] for i in sent], deadline), sent, len(documents))
        loop = asyncio.get_running_loop()
        if self._closed:
            raise RerankError("the batcher is closed")
        if deadline <= clock.now():
            raise DeadlineExceeded("the deadline passed before the request was queued")
        pairs = len(set(documents))
        if self._queue and self._queue.pairs + pairs > self._max_queued_pairs:
            raise QueueFull(f"more than {self._max_queued_pairs} pairs are already waiting")
        if self._shed:
            self._admit(deadline, pairs)
        job = Job(query=query, documents=documents, deadline=deadline, future=loop.create_future())
        self._queue.add(job)
        self._arrived.set()
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = loop.create_task(self._dispatch())
            self._dispatcher.add_done_callback(self._maybe_idle)
        timer = loop.call_at(deadline, self._expire, job)
        try:
            return RerankResult(ranked(await job.future), retries=job.retries, answered_by=job.answered_by,
                                failover_to=job.failover_to)
        finally:
            timer.cancel()
            self._finish(job, at_deadline=False)

    async def close(self) -> None:
        """Fail everything still waiting and stop the dispatcher and every request."""
        self._closed = True
        error = RerankError("the reranker is shutting down")
        self._fail_jobs(self._queue.drain(), error)
        tasks = [plan.task for plan in self._plans if plan.task is not None]
        for plan in list(self._plans):
            self._fail_jobs(plan.jobs, error)
        if self._dispatcher:
            self._dispatcher.cancel()
            tasks.append(self._dispatcher)
        await asyncio.gather(*tasks, return_exceptions=True)

    def _expire(self, job: Job) -> None:
        self._fail_jobs([job], DeadlineExceeded("no answer before the deadline"), at_deadline=True)

    def _finish(self, job: Job, *, at_deadline: bool) -> None:
        """A job ended (result, error, deadline or cancellation): drop its unsent pairs and orphan requests."""
        self._queue.discard(job)
        for plan in list(job.plans):
            if not plan.has_waiters:
                plan.abandon(at_deadline=at_deadline)

    async def _dispatch(self) -> None:
        while self._queue and not self._closed:
            try:
                await self._dispatch_one()
            except Exception as exc:  # supervisor boundary: a bug here must not strand any caller
                self._fail_jobs(self._queue.drain(), RerankError(f"internal batching error: {type(exc).__name__}"))

    async def _dispatch_one(self) -> None:
        replica, lease = self._in_time(*await self._slots.acquire(self, due=self._queue.most_urgent))
        try:
            if replica.state.limiter.in_flight > 1:
                await self._wait_for_company(replica)
            self._start_shares(replica, lease)
        finally:
            if lease.holder is self:  # not handed to a plan, whose task gives it back
                lease.release()

    def _in_time(self, replica: Replica, lease: Lease) -> tuple[Replica, Lease]:
        """The replica drawn, or another with room when only that one could answer the most urgent recall in time: a
        slow replica drawn once its cost faded is asked again with a recall that has the time to spare."""
        if not self._queue:
            return replica, lease
        job, now = self._queue.jobs[0], clock.now()  # the earliest deadline

        def in_time(member: Replica) -> bool:
            return worth_sending(member.state.expected_latency(len(job.unsent), now), job.deadline - now)

        if in_time(replica):
            return replica, lease
        able = [r for r in self._slots.ready(exclude=[replica]) if r.state.limiter.has_room() and in_time(r)]
        if not able:
            return replica, lease
        lease.release()
        other = min(able, key=self._slots.cost)
        return other, other.state.limiter.take(self)

    def _start_shares(self, replica: Replica, lease: Lease) -> None:
        """Start requests with ``lease``, a slot of ``replica``, sharing the queue over the replicas short of work that
        cost no more so all finish together (a burst ends with its last share); ``replica`` takes one if short too."""
        if self._shed:
            self._shed_hopeless(replica)
        peers = self._slots.peers_short_of_work(replica, self._queue.pairs)
        was_short = replica.state.limiter.in_flight <= PIPELINE_DEPTH
        targets = sorted([replica, *peers] if was_short or not peers else peers, key=self._slots.cost)
        # shared once over all: a share cut at ``max_pairs`` leaves its rest queued, not to the slower ones after it
        shares = balanced_shares(self._queue.pairs, *self._slots.share_costs(targets, clock.now())) if peers else None
        for i, target in enumerate(targets):
            share = shares[i] if shares is not None else None
            if share is not None and share < 0.5 and target is not replica:
                continue  # what it has in flight already takes it past the others' finish
            # (the replica the balancer chose takes a recall at least: its pace is only learnt by asking)
            plan = self._queue.take(max_pairs=self._max_pairs, mixes_queries=self._mixes_queries, share=share)
            if plan is None:
                break
            if target is replica:
                plan.lease = lease.hand_to(plan)
            else:  # it has room (peers_short_of_work saw to that): no wait
                plan.lease = target.state.limiter.take(plan)
            plan.replica = target
            self._start(plan)

    def _admit(self, deadline: float, pairs: int) -> None:
        """Shed (raise ``Overloaded``) a recall the servers cannot answer in time, or one that, served first, would make
        one queued with a longer timeout miss its deadline: an admitted recall keeps its answer."""
        now, queues = clock.now(), self._slots.queues()  # every batcher's queue for these servers, gathered once
        wait = self._slots.expected_wait(sum(queue.pairs_due_by(deadline) for queue in queues), pairs, now)
        if not admits(wait, deadline - now):
            raise Overloaded(shed_message(wait or 0.0, deadline - now))
        if all(queue.latest() <= deadline for queue in queues):
            return  # nothing queued is due later: with one timeout, always
        ahead = 0
        for queued in heapq.merge(*(queue.jobs for queue in queues), key=lambda job: job.deadline):
            if queued.deadline > deadline:  # one sent in part too: its rest, still queued, would be passed
                room = queued.deadline - now
                if admits(self._slots.expected_wait(ahead, len(queued.unsent), now), room) and not admits(
                        self._slots.expected_wait(ahead + pairs, len(queued.unsent), now), room):
                    raise Overloaded("the reranker is overloaded: served first, this recall would make one queued "
                                     "with a longer timeout miss its deadline")
            ahead += len(queued.unsent)

    def _shed_hopeless(self, replica: Replica) -> None:
        """Shed the queued recalls no request sent now could answer in time. A lone recall always goes: its answer
        renews an estimate made in a slow spell, which an idle server's silence does not fade."""
        now, jobs, members = clock.now(), self._queue.jobs, self._slots.replicas
        if len(jobs) == 1 and sum(q.pairs for q in self._slots.queues()) == self._queue.pairs and not any(
                r.state.outstanding_requests for r in members):
            return
        able = [replica, *(r for r in self._slots.ready(exclude=[replica]) if r.state.limiter.has_room())]
        for job in jobs:
            latencies = [r.state.expected_latency(len(job.unsent), now) for r in able]
            if not any(worth_sending(latency, job.deadline - now) for latency in latencies):
                fastest = min(latency or 0.0 for latency in latencies)
                self._fail_jobs([job], Overloaded(shed_message(fastest, job.deadline - now)))

    async def _wait_for_company(self, replica: Replica) -> None:
        """Others are in flight: let more jobs join until ``window`` after the oldest, never past ``BATCH_WINDOW_SHARE``
        of any job's time, nor so late that the request could not be answered in time."""
        jobs = self._queue.jobs
        if not jobs:
            return
        latency = replica.state.expected_latency(min(self._queue.pairs, self._max_pairs), clock.now()) or 0.0
        closes_at = min(min(job.enqueued_at for job in jobs) + self._window,
                        *(job.enqueued_at + BATCH_WINDOW_SHARE * (job.deadline - job.enqueued_at) for job in jobs),
                        *(job.deadline - latency * SEND_MARGIN for job in jobs))
        while self._queue and self._queue.pairs < self._max_pairs and (remaining := closes_at - clock.now()) > 0:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return

    def _start(self, plan: Plan) -> None:
        """Hand the plan and its slot to a task first, so that its done callback gives the slot back whatever fails."""
        plan.task = asyncio.get_running_loop().create_task(self._send_plan(plan))
        plan.task.add_done_callback(functools.partial(self._plan_done, plan))
        self._plans.add(plan)
        now = clock.now()
        for job in plan.jobs:
            job.plans.add(plan)
            if not job.sent:
                job.sent = True
                self.dispatch.events.on_queue_wait(now - job.enqueued_at)

    def _plan_done(self, plan: Plan, task: asyncio.Task[None]) -> None:
        """Runs however the task ended, even cancelled before its first step: the slot comes back."""
        if plan.lease is not None:
            plan.lease.release()
        plan.replica = plan.lease = None
        self._plans.discard(plan)
        jobs = plan.jobs
        for job in jobs:
            job.plans.discard(plan)
        if task.cancelled():  # shutdown, or cancelled before it could answer: nobody may be left waiting
            self._fail_jobs(jobs, DeadlineExceeded("no answer before the deadline"))
        self._maybe_idle(task)

    def _maybe_idle(self, task: asyncio.Task[None]) -> None:
        """A task of this batcher ended (the dispatcher or a request's): say so when it left it idle."""
        if self.idle and not self._closed:
            self._on_idle()

    async def _send_plan(self, plan: Plan) -> None:
        """Deliver the scores, or fail the waiters with the error masked of every text sent (others' memories too)."""
        try:
            scores = await self.dispatch.carry_out(plan)
            if scores is not None:
                plan.deliver(scores)
        except RerankError as exc:
            self._fail_jobs(plan.jobs, exc.masked(*plan.batch.queries, *plan.batch.documents))
        except Exception as exc:  # a bug in dispatch or delivery: fail the waiters, never strand them
            self._fail_jobs(plan.jobs, RerankError(f"unexpected error: {type(exc).__name__}"))

    def _fail_jobs(self, jobs: Sequence[Job] | set[Job], error: BaseException, *, at_deadline: bool = False) -> None:
        for job in list(jobs):
            job.fail(error)
            self._finish(job, at_deadline=at_deadline)


def balanced_shares(pairs: int, per_pair_s: Sequence[float], busy_s: Sequence[float]) -> list[float]:
    """Each member's share of ``pairs`` so all finish together at ``T``: ``(T - busy_s[i]) / per_pair_s[i]``, or
    nothing when busy past ``T`` (water-filling: members join from the least busy)."""
    order = sorted(range(len(per_pair_s)), key=lambda i: busy_s[i])
    joined: list[int] = []
    finish = 0.0
    for position, member in enumerate(order):
        joined.append(member)
        rate = sum(1.0 / per_pair_s[j] for j in joined)
        finish = (pairs + sum(busy_s[j] / per_pair_s[j] for j in joined)) / rate
        if position + 1 == len(order) or finish <= busy_s[order[position + 1]]:
            break
    return [max(0.0, (finish - busy_s[i]) / per_pair_s[i]) if i in joined else 0.0 for i in range(len(per_pair_s))]
