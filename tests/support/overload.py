"""Overload a real loopback server on purpose: recalls it cannot answer before their deadline are shed
while it holds the others at its gate (sequenced by the gate and the counters, not by time)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from support.counters import stats_until
from support.deadlines import PATIENT_S
from support.encoding import recall
from support.servers import Delay, RecordedRequest, RunningServer
from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.errors import Overloaded, RerankError
from usr.plugins.a0_reranker.core.statistics import RerankerStatistics
from usr.plugins.a0_reranker.service import runtime


async def outcome(batcher: MicroBatcher, query: str, documents: int, deadline: float) -> str:
    """How one recall of ``documents`` ended at a batcher: ``reranked``, ``overload`` (shed), or its reason."""
    try:
        await batcher.score(query, [f"{query} memory {k}" for k in range(documents)], deadline)
        return "reranked"
    except RerankError as exc:
        return "overload" if isinstance(exc, Overloaded) else exc.reason


def posts(request: RecordedRequest) -> bool:
    return request.method == "POST"


async def learn_pace(config: RerankerConfig, server: RunningServer, server_seconds: float, recalls: int = 3) -> None:
    """A few recalls answered after ``server_seconds`` each: what the engine learns the server's pace from."""
    server.set_fault(lambda r: Delay(server_seconds) if posts(r) else None)
    for q in range(recalls):
        assert await runtime.rerank_async(*recall(q, 4), config=config.replace(timeout=PATIENT_S)) is not None
    server.set_fault(None)


async def held_burst(config: RerankerConfig, server: RunningServer, callers: int
                     ) -> tuple[list[asyncio.Task[Any]], RerankerStatistics]:
    """``callers`` recalls of 4 memories while the server holds the first request at its gate; returns
    once each of them is either queued or shed (the gate still closed) with the counters then."""
    server.gate.hold(posts)
    calls = [asyncio.create_task(runtime.rerank_async(*recall(10 + q, 4), config=config)) for q in range(callers)]
    await server.gate.wait_held(1)
    stats = await stats_until(lambda s: s.fallbacks.get("overload", 0) + s.queued_pairs // 4 + 1 == callers)
    return calls, stats


def held(servers: list[RunningServer]) -> list[int]:
    return [s.gate.held for s in servers]


async def until_held(servers: list[RunningServer], total: int) -> None:
    """Until the servers hold ``total`` requests between them (woken by each gate's next arrival)."""
    for _ in range(100):
        if sum(held(servers)) >= total:
            return
        waits = [asyncio.ensure_future(s.gate.wait_held(s.gate.held + 1, within_s=30)) for s in servers]
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            task.result()  # a gate that saw nothing for 30 s raises here
    pytest.fail(f"the servers hold {held(servers)}, not {total} requests")
