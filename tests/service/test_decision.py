"""The caller counts the outcome it returns, once, where it returns it (issue 22: counting where it
happens, no arbitration object). Through the real owner loop and a loopback vLLM server: a recall
answered in time is counted as reranked; one whose owner loop is held past the backstop returns the
timeout, is counted as that timeout, and its work on the owner loop, cancelled, counts nothing more."""

from __future__ import annotations

import asyncio
import threading

import pytest

from support.counters import stats_until
from support.encoding import recall
from support.servers import RunningServer
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio


def counted() -> tuple[int, int, dict[str, int], int]:
    stats = runtime.stats_recorder().snapshot()
    assert stats.reranks == stats.reranked + stats.fallback_total + stats.cancelled, stats
    return stats.reranks, stats.reranked, dict(stats.fallbacks), stats.cancelled


async def hold(release: threading.Event) -> None:
    """Runs on the owner loop and blocks its thread: nothing else there moves until ``release``."""
    release.wait()


async def test_what_the_caller_returns_is_what_is_counted(vllm_server: RunningServer) -> None:
    config = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=10.0)
    assert (await runtime.rerank_result_async(*recall(0, 4), config=config)).ranking is not None
    assert counted() == (1, 1, {}, 0)

    current, release = runtime.runtime(), threading.Event()
    held = current.owner.submit(hold, release)
    try:  # the owner loop cannot answer: the caller's backstop returns the timeout at its deadline
        result = await asyncio.to_thread(runtime.rerank_result, *recall(1, 4), config=config.replace(timeout=0.2))
    finally:
        release.set()
    held.result(timeout=10)
    assert (result.ranking, result.reason) == (None, "timeout")
    current.owner.call(asyncio.sleep, 0)  # the cancelled rerank has unwound on the owner loop
    current.owner.call(asyncio.sleep, 0)
    assert counted() == (2, 1, {"timeout": 1}, 0)  # counted as what the caller got, and nothing more


async def test_a_caller_that_leaves_is_counted_as_cancelled_and_nothing_else(
        vllm_server: RunningServer) -> None:
    config = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=10.0)
    assert await runtime.rerank_async(*recall(0, 4), config=config) is not None  # warm: detected
    vllm_server.gate.hold(lambda r: r.method == "POST")
    leaving = asyncio.create_task(runtime.rerank_async(*recall(1, 4), config=config))
    await vllm_server.gate.wait_held(1)
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    vllm_server.gate.release()
    assert counted() == (2, 1, {}, 1)
    # What the leaving caller took comes back: its request's slot, its queued pairs, the server's breaker.
    after = await stats_until(lambda s: s.in_flight == 0 and s.queued_pairs == 0)
    assert after.breakers[vllm_server.url] == "closed"  # a caller leaving says nothing of the server
