"""The breaker tells a dead server from a flaky one (issue: resilience, acceptance 1 and 4).

A server that refuses or never answers opens it after at most three failed requests; calls then skip
it at no cost (nothing reaches the server, each is counted as skipped, and its median cost is below a
reranked call's measured in the same test: a side-by-side sanity check, the ratio itself is
``bench/deadline_release.py``'s), and it closes when the server is back. A server failing 70% of requests opens it by its
failure rate; one failing 15% keeps it closed and is reranked. A probe is given back on every path,
also when the cooldown ends between two reads of the breaker's clock.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from typing import Any

import pytest

from support.deadlines import PATIENT_S, ManualClock, Stopwatch
from support.encoding import encoding_scorer, recall
from support.outages import OVERLOADED, closed_port
from support.servers import Disconnect, Hang, RecordedRequest, start_server
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.statistics import StatsRecorder
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.reranker_service import RerankService

pytestmark = pytest.mark.anyio


async def calls_until_open(config: RerankerConfig, url: str, most: int) -> int:
    for call in range(1, most + 1):
        assert await runtime.rerank_async(*recall(call, 4), config=config) is None
        if runtime.statistics().breakers.get(url) == "open":
            return call
    raise AssertionError(f"the breaker did not open in {most} calls: {runtime.statistics()}")


async def median_call_ms(config: RerankerConfig, *, reranked: bool, calls: int = 50) -> float:
    """The median cost of ``calls`` calls, each reranked or each not, as ``reranked`` says."""
    times = []
    for call in range(calls):
        watch = Stopwatch()
        ranking = await runtime.rerank_async(*recall(call, 4), config=config)
        times.append(watch.elapsed * 1000)
        assert (ranking is not None) == reranked, runtime.statistics().last_error
    return statistics.median(times)


def skipped_calls() -> int:
    return runtime.statistics().fallbacks.get("breaker_open", 0)


async def reranked_within(config: RerankerConfig, seconds: float) -> bool:
    """Call until reranked: the cooldown (real time) is the behaviour under test."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await runtime.rerank_async(*recall(1, 4), config=config) is not None:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_refused_server_opens_the_breaker_after_three_requests_and_closes_when_back() -> None:
    clock = ManualClock()
    runtime.restart(clock=clock)
    try:
        port = closed_port()
        url = f"http://127.0.0.1:{port}"
        config = RerankerConfig(endpoint=url, api="rerank", timeout=1.0, breaker_cooldown=15)
        assert await calls_until_open(config, url, most=3) <= 3
        before = skipped_calls()
        skipped_ms = await median_call_ms(config, reranked=False)
        assert skipped_calls() - before == 50  # each one skipped by the breaker, none sent
        server = await start_server("vllm", scorer=encoding_scorer, port=port)
        try:
            assert await runtime.rerank_async(*recall(1, 4), config=config) is None  # still cooling down
            clock.now += 15  # the cooldown is over: the next calls are the probes
            patient = config.replace(timeout=PATIENT_S)  # the probe detects the API, too: it must not race the clock
            assert await runtime.rerank_async(*recall(2, 4), config=patient) is not None
            assert runtime.statistics().breakers[url] == "closed"
            reranked_ms = await median_call_ms(patient, reranked=True)
            assert skipped_ms < reranked_ms, (skipped_ms, reranked_ms)
        finally:
            await server.close()
    finally:
        runtime.shutdown()


async def test_a_server_that_never_answers_opens_the_breaker_after_three_requests() -> None:
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=0.3, breaker_cooldown=0.3)
        reranked_ms = await median_call_ms(config.replace(timeout=PATIENT_S), reranked=True)
        server.set_fault(Hang())
        before = server.count()
        assert await calls_until_open(config, server.url, most=3) <= 3
        assert server.count() - before <= 3  # the hung POSTs, nothing more
        sent, skipped = server.count(), skipped_calls()
        skipped_ms = await median_call_ms(config, reranked=False)
        assert server.count() == sent  # skipped at no cost: nothing reached the server
        assert skipped_calls() - skipped == 50 and skipped_ms < reranked_ms, (skipped_ms, reranked_ms)
        server.set_fault(None)
        assert await reranked_within(config, 5.0)
    finally:
        await server.close()


def failing(share: float, seed: int, down_share: float = 0.0) -> Any:
    rng = random.Random(seed)

    def rule(request: RecordedRequest) -> Any:
        if request.method != "POST":
            return None
        draw = rng.random()
        if draw < share:
            return OVERLOADED
        return Disconnect() if draw < share + down_share else None

    return rule


async def test_a_server_failing_seventy_percent_of_requests_opens_the_breaker_by_its_failure_rate() -> None:
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=2.0, max_retries=0)
        assert await runtime.rerank_async(*recall(0, 4), config=config) is not None
        server.set_fault(failing(0.7, seed=1))
        opened = None
        for call in range(1, 200):
            await runtime.rerank_async(*recall(call, 4), config=config)
            if runtime.statistics().breakers[server.url] == "open":
                opened = call
                break
        # By the rate over 20 requests (the warm-up's detection and answer were two), not 503s in a row.
        assert opened is not None and opened >= 18, opened
    finally:
        await server.close()


async def test_a_server_failing_fifteen_percent_keeps_the_breaker_closed_and_is_reranked() -> None:
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=2.0)
        assert await runtime.rerank_async(*recall(0, 4), config=config) is not None
        server.set_fault(failing(0.10, seed=2, down_share=0.05))
        results = []
        for first in range(0, 400, 8):
            results += await asyncio.gather(*(runtime.rerank_async(*recall(q, 4), config=config)
                                              for q in range(first, first + 8)))
        stats = runtime.statistics()
        assert "breaker_open" not in stats.fallbacks, stats
        assert sum(r is not None for r in results) >= 0.97 * len(results), stats
        assert stats.breakers[server.url] == "closed"
    finally:
        await server.close()


class SteppingClock:
    """A clock that moves ``step`` seconds further on every read: any two reads see different times."""

    def __init__(self, now: float, step: float) -> None:
        self.now = now
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_the_cooldown_ending_between_two_reads_never_strands_a_probe() -> None:
    """Finding 4, on the breaker itself: whatever instant the cooldown ends at, a call that is let
    through as the probe reports its outcome, and one that gives up first gives the probe back."""
    for offset in range(-3, 4):
        clock = SteppingClock(0.0, step=1.0)
        breaker = CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=10, probes=1), clock=clock)
        permit = breaker.admit()
        assert permit is not None
        permit.report("down")  # opened at some clock reading t
        clock.now += 10 + offset - 2  # the cooldown ends within the next few reads
        for _ in range(6):
            if breaker.would_admit():
                probe = breaker.admit()
                if probe is not None:
                    probe.report("neutral")  # e.g. the call fell back on a full queue before sending
        clock.now += 20
        probe = breaker.admit()
        assert probe is not None, offset  # not stuck half-open with a probe out
        probe.report("success")
        assert breaker.state == "closed"


async def test_through_the_service_a_half_open_breaker_closes_whatever_its_probes_do() -> None:
    """Finding 4 through the service with an injected clock: no real cooldown is waited out."""
    clock = SteppingClock(1000.0, step=0.001)
    service = RerankService(StatsRecorder(), clock=clock)
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=2.0, breaker_failures=1,
                                breaker_cooldown=10, max_queued_pairs=4)

        async def call(q: int, **changes: Any) -> Any:
            cfg = config.replace(**changes)
            return (await service.rerank(*recall(q, 4), cfg, time.monotonic() + cfg.timeout)).ranking

        assert await call(0) is not None
        server.set_fault(lambda r: Disconnect() if r.method == "POST" else None)
        assert await call(1) is None
        assert service.live_state()["breakers"] == {server.url: "open"}
        server.set_fault(None)
        clock.now += 10  # the cooldown is over: the next calls are probes
        server.gate.hold(lambda r: r.method == "POST")
        probe = asyncio.create_task(call(2))
        await server.gate.wait_held(1)
        assert await call(3) is None  # no room for another probe: refused at once, nothing held
        probe.cancel()  # the probe's caller leaves: its permit must come back
        with pytest.raises(asyncio.CancelledError):
            await probe
        server.gate.release()
        results = [await call(q) for q in range(4, 8)]
        assert results[-1] is not None, service.live_state()
        assert service.live_state()["breakers"] == {server.url: "closed"}
    finally:
        await service.close()
        await server.close()
