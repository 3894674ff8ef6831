"""With several replicas, recalls that queue up while replicas are short of work (fewer than two
requests in flight) are shared out over them at once, rather than all sent to one
replica while the others run dry (the replica benchmark's finding: with the whole queue to one, 3
replicas gave 1.5-1.7x one; sharing over idle ones only, 2.3x with GPUs idle a quarter of the time
between passes; with two requests each, 2.6x). Through the public API against loopback vLLM servers
whose gates hold the requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from support.encoding import encoding_scorer, recall
from support.overload import held, until_held
from support.servers import Delay, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

MEMORIES = 4
WARM_UP_ANSWER_S = 0.2


@pytest.fixture
async def three() -> AsyncIterator[list[RunningServer]]:
    runtime.shutdown()  # a fresh engine: nothing an earlier test taught the balancer (a port may be reused)
    servers = [await start_server("vllm_qwen3", scorer=encoding_scorer) for _ in range(3)]
    yield servers
    for server in servers:
        await server.close()


def score_posts(server: RunningServer) -> list[Any]:
    return [r for r in server.requests if r.method == "POST" and r.path == "/score"]


async def warm_up(config: RerankerConfig, servers: list[RunningServer]) -> None:
    """Recalls until each replica has answered one: every route known, every speed measured. Each answer takes
    a GPU-like 0.2 s, so the speeds measured are equal whatever the machine's load adds (answers of a few
    milliseconds measured one replica more than twice as slow as another on a busy machine, and the balancer
    then rightly preferred a busy replica to it)."""
    for server in servers:
        server.set_fault(lambda r: Delay(WARM_UP_ANSWER_S) if r.method == "POST" else None)
    try:
        for q in range(100):
            assert await runtime.rerank_async(*recall(q, MEMORIES), config=config) is not None
            if all(score_posts(s) for s in servers):
                return
        pytest.fail(f"not every replica was used in 100 recalls: {[len(score_posts(s)) for s in servers]}")
    finally:
        for server in servers:
            server.set_fault(None)


async def test_one_recall_at_a_time_goes_to_a_replica_with_nothing_in_flight(three: list[RunningServer]) -> None:
    config = RerankerConfig(endpoint=", ".join(s.url for s in three), api="qwen3_score", hedge="off", timeout=10)
    await warm_up(config, three)
    for server in three:
        server.gate.hold(lambda r: r.path == "/score")
    first = []
    for q in range(3):  # each recall once the one before is held: P2C may pick a busy replica of two
        first.append(asyncio.create_task(runtime.rerank_async(*recall(q, MEMORIES), config=config)))
        await until_held(three, q + 1)
    assert held(three) == [1, 1, 1]  # shared with the cheapest first: never behind another while one has nothing
    for server in three:
        server.gate.release()
    assert all(r is not None for r in await asyncio.gather(*first))


async def test_a_queue_built_up_while_replicas_are_short_of_work_is_shared_out_over_them(
        three: list[RunningServer]) -> None:
    # Each replica runs one request (its GPU busy, nothing behind it). The window is long and a
    # request's worth is the nine recalls, so they are all queued when the batcher takes them: one
    # request would carry all nine.
    config = RerankerConfig(endpoint=", ".join(s.url for s in three), api="qwen3_score", batch_window_ms=1000,
                            max_pairs_per_request=9 * MEMORIES, hedge="off", timeout=10)
    await warm_up(config, three)
    for server in three:
        server.reset()
        server.gate.hold(lambda r: r.path == "/score")
    first = []
    for q in range(3):
        first.append(asyncio.create_task(runtime.rerank_async(*recall(q, MEMORIES), config=config)))
        await until_held(three, q + 1)
    assert held(three) == [1, 1, 1]
    rest = [asyncio.create_task(runtime.rerank_async(*recall(q, MEMORIES), config=config)) for q in range(3, 12)]
    await until_held(three, 6)  # each replica got a second request, queued behind its first
    assert held(three) == [2, 2, 2], runtime.statistics().replicas
    shares = [len(request.json["text_2"]) for server in three for request in score_posts(server)[1:]]
    assert sum(shares) == 9 * MEMORIES and min(shares) >= 1, shares  # every pair sent once, none left behind
    for server in three:
        server.gate.release()
    results = await asyncio.gather(*first, *rest)
    for q, ranking in enumerate(results):
        assert ranking is not None
        assert sorted(ranking) == [(d, q / 100 + d / 10000) for d in range(MEMORIES)]
