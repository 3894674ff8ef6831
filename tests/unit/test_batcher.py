"""The micro-batcher with a real event loop and a controllable ``send``: coalescing, the flush rule,
the concurrency cap, deadlines, cancellation and failure fan-out. Sequenced by events, never sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from support.loop_steps import until
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import DeadlineExceeded, MalformedAnswer, QueueFull, RerankError, ServerError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder

pytestmark = pytest.mark.anyio


def encode(query: str, doc: str) -> float:
    """A score that says which pair was scored: query number * 1000 + document number."""
    return int(query[1:]) * 1000 + int(doc[1:])


class Server:
    """A fake transport: records batches, can hold requests at a gate, counts requests in flight."""

    def __init__(self) -> None:
        self.batches: list[ScoreBatch] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()
        self.in_flight = 0
        self.max_in_flight = 0
        self.cancelled = 0
        self.fail_with: BaseException | None = None
        self.wrong_count = False

    async def send(self, batch: ScoreBatch, deadline: float, may_resend: Callable[[], bool]) -> list[float]:
        self.batches.append(batch)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        if self.fail_with is not None:
            raise self.fail_with
        scores = [encode(batch.queries[qi], doc) for qi, doc in batch.pairs]
        return scores[:-1] if self.wrong_count else scores


def make_batcher(server: Server, *, mixes: bool = True, cap: int = 4, max_pairs: int = 100, window: float = 0.01,
                 max_queued: int = 10_000, breaker: CircuitBreaker | None = None) -> MicroBatcher:
    """A batcher whose requests are never retried, so each test sees exactly one attempt per request."""
    state = EndpointState(EndpointLimiter(cap), breaker or CircuitBreaker(BreakerPolicy(cooldown=60)))
    replicas = ReplicaSet([Replica("http://server", state, server.send)], budget=RetryBudget())
    dispatch = Dispatch(replicas, StatsRecorder(), DispatchPolicy(max_retries=0, stale_retries=0))
    return MicroBatcher(dispatch, mixes_queries=mixes, max_pairs=max_pairs, window=window,
                        max_queued_pairs=max_queued)


async def score(batcher: MicroBatcher, query: str, documents: list[str], deadline: float) -> list[float]:
    ranking = (await batcher.score(query, documents, deadline)).ranking
    assert ranking is not None
    return [score for _, score in sorted(ranking)]  # back in document order


def later(seconds: float = 30.0) -> float:
    return time.monotonic() + seconds


async def test_a_lone_job_is_sent_at_once_whatever_the_window() -> None:
    server = Server()
    batcher = make_batcher(server, window=3600)
    # With a one-hour window, only the idle rule lets this finish before its one-second deadline.
    assert await score(batcher, "q1", ["d1", "d2"], later(1.0)) == [1001, 1002]
    assert len(server.batches) == 1


async def test_jobs_arriving_while_busy_share_one_request_and_get_their_own_scores() -> None:
    server = Server()
    server.gate.clear()
    batcher = make_batcher(server, window=0.05)
    first = asyncio.create_task(score(batcher, "q0", ["d0"], later()))
    await server.started.wait()
    others = [asyncio.create_task(score(batcher, f"q{i}", [f"d{j}" for j in range(5)], later())) for i in range(1, 9)]
    await until(lambda: batcher.queued_pairs == 40)  # all eight wait behind the held request
    server.gate.set()
    assert await first == [0]
    results = await asyncio.gather(*others)
    for i, scores in enumerate(results, start=1):
        assert scores == [i * 1000 + j for j in range(5)]
    assert len(server.batches) == 2
    assert len(server.batches[1].queries) == 8 and len(server.batches[1]) == 40


async def test_a_busy_batcher_waits_for_company_until_the_batch_is_full() -> None:
    server = Server()
    server.gate.clear()
    batcher = make_batcher(server, window=3600, max_pairs=4)
    blocker = asyncio.create_task(score(batcher, "q9", ["d9"], later()))
    await server.started.wait()
    server.started.clear()
    a = asyncio.create_task(score(batcher, "q1", ["d1", "d2"], later()))
    await until(lambda: batcher.queued_pairs == 2)
    b = asyncio.create_task(score(batcher, "q2", ["d1", "d2"], later()))
    await server.started.wait()  # the second request starts only once four pairs are queued
    assert [len(batch) for batch in server.batches] == [1, 4]
    server.gate.set()
    assert await a == [1001, 1002] and await b == [2001, 2002]
    await blocker


async def test_different_queries_on_rerank_family_respect_the_cap() -> None:
    server = Server()
    server.gate.clear()
    batcher = make_batcher(server, mixes=False, cap=2, window=0)
    tasks = [asyncio.create_task(score(batcher, f"q{i}", ["d1", "d2"], later())) for i in range(10)]
    await server.started.wait()
    await until(lambda: server.in_flight == 2)  # the cap's worth of requests is out, the rest queued
    server.gate.set()
    results = await asyncio.gather(*tasks)
    assert results == [[i * 1000 + 1, i * 1000 + 2] for i in range(10)]
    assert server.max_in_flight == 2
    assert all(len(batch.queries) == 1 for batch in server.batches)


async def test_same_query_jobs_merge_with_documents_deduplicated() -> None:
    server = Server()
    server.gate.clear()
    batcher = make_batcher(server, mixes=False)
    blocker = asyncio.create_task(score(batcher, "q9", ["d0"], later()))
    await server.started.wait()
    jobs = [asyncio.create_task(score(batcher, "q1", ["d1", "d2", "d3"], later())) for _ in range(4)]
    await until(lambda: batcher.queued_pairs == 12)  # all four queued (each counts its own pairs)
    server.gate.set()
    assert await asyncio.gather(*jobs) == [[1001, 1002, 1003]] * 4
    await blocker
    assert len(server.batches) == 2 and server.batches[1].documents == ["d1", "d2", "d3"]


async def test_jobs_bigger_than_a_request_are_split_and_merged_back() -> None:
    server = Server()
    batcher = make_batcher(server, mixes=False, max_pairs=32)
    docs = [f"d{i}" for i in range(40)]
    assert await score(batcher, "q3", docs, later()) == [3000 + i for i in range(40)]
    assert sorted(len(batch) for batch in server.batches) == [8, 32]


async def test_deadline_expiry_answers_at_once_and_cancels_the_orphaned_request() -> None:
    server = Server()
    server.gate.clear()  # the server never answers
    breaker = CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=60))
    batcher = make_batcher(server, breaker=breaker)
    with pytest.raises(DeadlineExceeded):
        await score(batcher, "q1", ["d1"], later(0.05))
    await until(lambda: server.cancelled == 1)
    assert breaker.state == "open"


async def test_cancelling_one_caller_leaves_the_shared_request_to_the_others() -> None:
    server = Server()
    server.gate.clear()
    batcher = make_batcher(server, mixes=True)
    blocker = asyncio.create_task(score(batcher, "q9", ["d9"], later()))
    await server.started.wait()
    leaving = asyncio.create_task(score(batcher, "q1", ["d1"], later()))
    staying = asyncio.create_task(score(batcher, "q2", ["d2"], later()))
    await until(lambda: batcher.queued_pairs == 2)
    server.gate.set()
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert await staying == [2002]
    await blocker
    assert server.cancelled == 0


async def test_the_last_waiter_leaving_cancels_the_request() -> None:
    server = Server()
    server.gate.clear()
    batcher = make_batcher(server)
    task = asyncio.create_task(score(batcher, "q1", ["d1"], later()))
    await server.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: server.cancelled == 1 and batcher.in_flight == 0)


async def test_a_full_queue_refuses_at_once() -> None:
    server = Server()
    server.gate.clear()
    batcher = make_batcher(server, max_queued=3, cap=1, window=0)
    blocker = asyncio.create_task(score(batcher, "q0", ["d0"], later()))
    await server.started.wait()
    queued = asyncio.create_task(score(batcher, "q1", ["d1", "d2", "d3"], later()))
    await until(lambda: batcher.queued_pairs == 3)
    with pytest.raises(QueueFull):
        await score(batcher, "q2", ["d1"], later())
    server.gate.set()
    assert await queued == [1001, 1002, 1003]
    await blocker


@pytest.mark.parametrize(
    ("fault", "expected"),
    [("server", ServerError), ("count", MalformedAnswer), ("bug", RerankError)],
)
async def test_every_waiter_of_a_failed_request_gets_the_error(fault: str, expected: type[Exception]) -> None:
    server = Server()
    server.gate.clear()
    if fault == "server":
        server.fail_with = ServerError(503, "down")
    elif fault == "bug":
        server.fail_with = KeyError("oops")
    else:
        server.wrong_count = True
    batcher = make_batcher(server)
    tasks = [asyncio.create_task(score(batcher, f"q{i}", ["d1"], later())) for i in range(5)]
    await server.started.wait()
    server.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, expected) for r in results)
    # The batcher is still usable after a failure.
    server.fail_with, server.wrong_count = None, False
    assert await score(batcher, "q7", ["d7"], later()) == [7007]


async def test_close_fails_everything_still_waiting() -> None:
    server = Server()
    server.gate.clear()
    batcher = make_batcher(server, cap=1)
    tasks = [asyncio.create_task(score(batcher, f"q{i}", ["d1"], later())) for i in range(3)]
    await server.started.wait()
    await batcher.close()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, RerankError) for r in results)


async def test_a_request_held_back_earns_no_retry_budget() -> None:
    """The retry budget is a share of the requests that went out: one the open breaker held back adds
    nothing to it (it once did, and a budget of "20% of requests" allowed retries for requests never sent)."""
    server = Server()
    breaker = CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=60))
    breaker.attempt().report("down")  # open: every attempt is refused
    state = EndpointState(EndpointLimiter(4), breaker)
    budget = RetryBudget(ratio=1.0, reserve=0)
    dispatch = Dispatch(ReplicaSet([Replica("http://server", state, server.send)], budget=budget),
                        StatsRecorder(), DispatchPolicy(max_retries=0))
    batcher = MicroBatcher(dispatch, mixes_queries=True, max_pairs=100, window=0.01, max_queued_pairs=1000)
    for n in range(5):
        with pytest.raises(RerankError):
            await score(batcher, f"q{n}", ["d1", "d2"], later())
    assert server.batches == [] and not budget.try_spend()  # five held back: not one retry earned
    healthy = make_batcher(Server())
    assert await score(healthy, "q0", ["d1"], later()) == [1]
    assert healthy.dispatch.replicas.budget.try_spend()  # one sent: within the reserve, as before


@pytest.mark.parametrize(("policy", "kept"), [(DispatchPolicy(), False), (DispatchPolicy(hedge=True), True),
                                              (DispatchPolicy(hedge=True, hedge_delay_s=0.5), False)])
async def test_answer_times_are_kept_only_where_a_hedge_delay_is_read_from_them(policy: DispatchPolicy,
                                                                                kept: bool) -> None:
    server = Server()
    state = EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy(cooldown=60)))
    replicas = ReplicaSet([Replica("http://server", state, server.send)], budget=RetryBudget())
    batcher = MicroBatcher(Dispatch(replicas, StatsRecorder(), policy), mixes_queries=True, max_pairs=100,
                           window=0.01, max_queued_pairs=10_000)
    for q in range(20):  # enough answers for the window to say its percentile
        assert await score(batcher, f"q{q}", ["d1", "d2"], later()) == [q * 1000 + 1, q * 1000 + 2]
    assert (replicas.latency.percentile(0.95) is not None) == kept
