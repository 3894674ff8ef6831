"""Circuit breaker states on a fake clock; the coalescing rule of the pending queue."""

from __future__ import annotations

import asyncio

from support.deadlines import ManualClock
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, Health
from usr.plugins.a0_reranker.batching.queue import Job, PendingQueue


def fail(breaker: CircuitBreaker, health: Health = "down") -> None:
    permit = breaker.admit()
    assert permit is not None
    permit.report(health)


def succeed(breaker: CircuitBreaker) -> None:
    permit = breaker.admit()
    assert permit is not None
    permit.report("success")


def test_breaker_opens_after_consecutive_failures_and_one_probe_closes_it() -> None:
    clock = ManualClock(100.0)
    breaker = CircuitBreaker(BreakerPolicy(consecutive=3, cooldown=10, probes=1), clock=clock)
    for _ in range(2):
        fail(breaker)
    succeed(breaker)  # a success resets the count
    for _ in range(3):
        fail(breaker)
    assert breaker.state == "open" and breaker.admit() is None
    clock.now += 10
    assert breaker.state == "half_open"
    probe = breaker.admit()  # the probe
    assert probe is not None and probe.probe
    assert breaker.admit() is None  # only one
    probe.report("down")
    assert breaker.state == "open"
    clock.now += 10
    probe = breaker.admit()
    assert probe is not None
    probe.report("success")
    assert breaker.state == "closed" and breaker.admit() is not None


def test_a_probe_that_never_reached_the_server_can_be_retried() -> None:
    clock = ManualClock(100.0)
    breaker = CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=1, probes=1), clock=clock)
    fail(breaker)
    clock.now += 1
    probe = breaker.admit()
    assert probe is not None and breaker.admit() is None
    probe.report("neutral")
    assert breaker.admit() is not None


def make_job(loop: asyncio.AbstractEventLoop, query: str, docs: list[str]) -> Job:
    return Job(query=query, documents=docs, deadline=1e12, future=loop.create_future())


def test_same_query_merges_and_dedupes_other_queries_wait() -> None:
    loop = asyncio.new_event_loop()
    try:
        queue = PendingQueue()
        a = make_job(loop, "q1", ["x", "y", "x"])
        b = make_job(loop, "q2", ["z"])
        c = make_job(loop, "q1", ["y", "w"])
        for job in (a, b, c):
            queue.add(job)
        assert queue.pairs == 5  # x, y | z | y, w
        plan = queue.take(max_pairs=10, mixes_queries=False)
        assert plan is not None
        assert plan.batch.queries == ("q1",)
        assert plan.batch.documents == ["x", "y", "w"]
        assert plan.routes[("q1", "y")] == [a, c]
        assert queue.pairs == 1
        rest = queue.take(max_pairs=10, mixes_queries=False)
        assert rest is not None and rest.batch.queries == ("q2",) and not queue
        plan.deliver([0.1, 0.2, 0.3])
        assert a.future.result() == [0.1, 0.2, 0.1]
        assert c.future.result() == [0.2, 0.3]
        assert not b.future.done()
    finally:
        loop.close()


def test_mixed_queries_share_a_request_and_big_jobs_split() -> None:
    loop = asyncio.new_event_loop()
    try:
        queue = PendingQueue()
        big = make_job(loop, "q1", [f"d{i}" for i in range(5)])
        small = make_job(loop, "q2", ["e"])
        queue.add(big)
        queue.add(small)
        first = queue.take(max_pairs=3, mixes_queries=True)
        second = queue.take(max_pairs=3, mixes_queries=True)
        assert first is not None and second is not None and queue.take(max_pairs=3, mixes_queries=True) is None
        assert first.batch.pairs == ((0, "d0"), (0, "d1"), (0, "d2"))
        assert second.batch.queries == ("q1", "q2")
        assert second.batch.pairs == ((0, "d3"), (0, "d4"), (1, "e"))
        second.deliver([4.0, 5.0, 9.0])
        assert small.future.result() == [9.0] and not big.future.done()
        first.deliver([1.0, 2.0, 3.0])
        assert big.future.result() == [1.0, 2.0, 3.0, 4.0, 5.0]
    finally:
        loop.close()


def test_discard_forgets_unsent_pairs() -> None:
    loop = asyncio.new_event_loop()
    try:
        queue = PendingQueue()
        job = make_job(loop, "q", ["a", "b"])
        queue.add(job)
        queue.discard(job)
        assert queue.pairs == 0 and not queue and queue.take(max_pairs=5, mixes_queries=True) is None
    finally:
        loop.close()


def test_status_shows_the_worst_breaker_of_an_endpoint_used_with_several_keys() -> None:
    from usr.plugins.a0_reranker.core.config import RerankerConfig
    from usr.plugins.a0_reranker.core.statistics import StatsRecorder
    from usr.plugins.a0_reranker.service.reranker_service import RerankService

    service = RerankService(StatsRecorder())
    loop = asyncio.new_event_loop()
    try:
        for key in ("", "key-one", "key-two"):
            endpoint = service._registry.endpoint(RerankerConfig(endpoint="http://h:1", api_key=key,
                                                                 breaker_failures=1), "http://h:1")
            if key == "key-one":
                fail(endpoint.state.breaker)
        assert service.live_state()["breakers"] == {"http://h:1": "open"}
    finally:
        loop.run_until_complete(service.close())
        loop.close()


def test_the_registry_forgets_healthy_endpoints_before_one_that_is_down_and_keeps_its_bound() -> None:
    """Issue 21, finding 4: a server that is down keeps its open breaker however many others come and
    go; the bound holds all the same, also when every endpoint kept is down."""
    from usr.plugins.a0_reranker.core.config import RerankerConfig
    from usr.plugins.a0_reranker.core.statistics import StatsRecorder
    from usr.plugins.a0_reranker.service.endpoints import EndpointRegistry

    registry = EndpointRegistry(StatsRecorder(), max_endpoints=2)
    config = RerankerConfig(endpoint="http://h:1", breaker_failures=1)
    down = registry.endpoint(config, "http://down:1")
    fail(down.state.breaker)
    for n in range(5):  # each used once: the least recently used goes first, unless it is the one down
        registry.endpoint(config, f"http://up-{n}:1")
    assert registry.endpoint(config, "http://down:1") is down
    assert registry.live_state()["breakers"]["http://down:1"] == "open"
    for n in range(5):
        fail(registry.endpoint(config, f"http://down-{n}:1").state.breaker)
    assert registry.footprint()["endpoints"] == 2
