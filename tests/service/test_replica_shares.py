"""With several replicas, recalls that queue up while some replicas sit idle are shared out over those
at once, in whole recalls, rather than all sent to one replica while the others wait for work (the
replica benchmark's finding: without it, 3 replicas gave 1.5-1.7x one, GPUs busy half the time).
Through the public API against loopback vLLM servers whose gates hold the requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from support.encoding import encoding_scorer, recall
from support.servers import RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

MEMORIES = 4


@pytest.fixture
async def three() -> AsyncIterator[list[RunningServer]]:
    servers = [await start_server("vllm_qwen3", scorer=encoding_scorer) for _ in range(3)]
    yield servers
    for server in servers:
        await server.close()


def score_posts(server: RunningServer) -> list[Any]:
    return [r for r in server.requests if r.method == "POST" and r.path == "/score"]


def recalls_in(request: Any) -> int:
    return len(request.json["text_2"]) // MEMORIES


async def warm_up(config: RerankerConfig, servers: list[RunningServer]) -> None:
    """Recalls until each replica has answered one: every route known, every speed measured."""
    for q in range(100):
        assert await runtime.rerank_async(*recall(q, MEMORIES), config=config) is not None
        if all(score_posts(s) for s in servers):
            return
    pytest.fail(f"not every replica was used in 100 recalls: {[len(score_posts(s)) for s in servers]}")


async def first_to_hold(servers: list[RunningServer]) -> RunningServer:
    waits = {asyncio.ensure_future(s.gate.wait_held(1)): s for s in servers}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return waits[next(iter(done))]


async def test_a_queue_built_up_while_idle_replicas_wait_is_shared_out_over_them(three: list[RunningServer]) -> None:
    # The window is long and a request's worth is the nine recalls, so they are all queued when the
    # batcher takes them: one request would carry all nine.
    config = RerankerConfig(endpoint=", ".join(s.url for s in three), api="qwen3_score", batch_window_ms=1000,
                            max_pairs_per_request=9 * MEMORIES, hedge="off", timeout=10)
    await warm_up(config, three)
    for server in three:
        server.reset()
        server.gate.hold(lambda r: r.path == "/score")
    first = asyncio.create_task(runtime.rerank_async(*recall(0, MEMORIES), config=config))
    busy = await first_to_hold(three)
    rest = [asyncio.create_task(runtime.rerank_async(*recall(q, MEMORIES), config=config)) for q in range(1, 10)]
    idle = [s for s in three if s is not busy]
    for server in idle:
        await server.gate.wait_held(1)  # each idle replica got a request of its own, at once
    shares = [recalls_in(request) for server in idle for request in score_posts(server)]
    assert sum(shares) == 9 and len(shares) == 2 and min(shares) >= 1, shares  # whole recalls, none left behind
    assert len(score_posts(busy)) == 1  # nothing more queued behind the busy one
    for server in three:
        server.gate.release()
    results = await asyncio.gather(first, *rest)
    for q, ranking in enumerate(results):
        assert ranking is not None
        assert sorted(ranking) == [(d, q / 100 + d / 10000) for d in range(MEMORIES)]
