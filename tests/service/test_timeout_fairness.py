"""A timeout counts against a replica's share of the work exactly when it counts against its breaker
(docs/overload.md, "Fair chance"): one of a request sent with too little time left is our own queue's
doing, and must not push recalls off a healthy replica; one of a request sent with a fair chance makes the
balancer leave that replica alone for a while, before its breaker opens. Through the public API against
two loopback vLLM servers, sequenced by their gates and request counts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from support.counters import accounted, stats_until
from support.deadlines import PATIENT_S
from support.encoding import encoding_scorer, recall
from support.overload import posts, until_held
from support.servers import Delay, Hang, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

ANSWER_S = 0.3  # the pace the engine learns: a timeout of 0.45 s had less than twice that, one of 3 s plenty


@pytest.fixture
async def two() -> AsyncIterator[list[RunningServer]]:
    runtime.shutdown()  # a fresh engine: no failure an earlier test left on a replica (a port may be reused)
    servers = [await start_server("vllm", scorer=encoding_scorer) for _ in range(2)]
    yield servers
    for server in servers:
        await server.close()


def sent(server: RunningServer) -> int:
    return sum(posts(r) for r in server.requests)


async def warm_up(config: RerankerConfig, servers: list[RunningServer]) -> None:
    """Recalls answered after ``ANSWER_S`` each until both replicas answered twice: routes known, pace learnt."""
    for server in servers:
        server.set_fault(lambda r: Delay(ANSWER_S) if posts(r) else None)
    for q in range(40):
        assert await runtime.rerank_async(*recall(q, 4), config=config.replace(timeout=PATIENT_S)) is not None
        if all(sent(s) >= 2 for s in servers):
            break
    else:
        pytest.fail(f"a replica was not used in 40 recalls: {[sent(s) for s in servers]}")
    for server in servers:
        server.set_fault(None)


@pytest.mark.parametrize(("seconds", "held_against_it"), [(0.45, False), (3.0, True)])
async def test_a_replica_loses_its_share_after_a_timeout_only_when_it_had_a_fair_chance(
        two: list[RunningServer], seconds: float, held_against_it: bool) -> None:
    """Both replicas stop answering and a recall times out at one of them. Then, with both gates holding
    requests, two recalls go out one after the other: after a timeout with less than a fair chance the
    replica takes one of them (the other replica is busy with the first), after one with a fair chance
    both go to the other replica. Either way both breakers stay closed: this is the balancer's doing."""
    config = RerankerConfig(endpoint=", ".join(s.url for s in two), api="rerank", hedge="off", max_retries=0)
    await warm_up(config, two)
    for server in two:
        server.set_fault(lambda r: Hang() if posts(r) else None)
    before = [sent(s) for s in two]
    assert await runtime.rerank_async(*recall(90, 4), config=config.replace(timeout=seconds)) is None
    stats = await stats_until(accounted)
    grown = [sent(s) - count for s, count in zip(two, before, strict=True)]
    assert sorted(grown) == [0, 1] and stats.fallbacks == {"timeout": 1}, (grown, stats.fallbacks)
    timed_out, other = (two[0], two[1]) if grown[0] else (two[1], two[0])
    for server in two:
        server.set_fault(None)
        server.gate.hold(posts)
    calls = []
    for q in range(2):  # each once the one before is held: the first keeps one replica busy
        calls.append(asyncio.create_task(runtime.rerank_async(*recall(100 + q, 2), config=config)))
        await until_held(two, q + 1)
    assert [timed_out.gate.held, other.gate.held] == ([0, 2] if held_against_it else [1, 1])
    for server in two:
        server.gate.release()
    assert all(result is not None for result in await asyncio.gather(*calls))
    stats = await stats_until(accounted)
    assert set(stats.breakers.values()) == {"closed"}, stats.breakers
