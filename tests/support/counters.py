"""Wait on the engine's counters: they are the tests' only view into the owner loop's state."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from usr.plugins.a0_reranker.core.statistics import RerankerStatistics
from usr.plugins.a0_reranker.service import runtime


async def stats_until(condition: Callable[[RerankerStatistics], bool], within_s: float = 10.0) -> RerankerStatistics:
    """Read the counters until ``condition`` holds; fail after ``within_s``.

    The owner loop offers no event to await from another loop, so this polls; a condition, not a
    fixed sleep, decides when the test goes on.
    """
    with anyio.fail_after(within_s):
        while True:
            stats = await anyio.to_thread.run_sync(runtime.statistics)
            if condition(stats):
                return stats
            await anyio.sleep(0.005)


async def owner_call(func: Callable[[Any], Any]) -> Any:
    """``func(service)`` run on the owner loop: how a test reads state that the counters do not show."""
    current = runtime.runtime()

    async def on_owner() -> Any:
        return func(current.service)

    return await asyncio.wrap_future(current.owner.submit(on_owner))


async def footprint_until(condition: Callable[[dict[str, int]], bool], within_s: float = 10.0) -> dict[str, int]:
    """The service's footprint (state kept, detections cached and under way) once ``condition`` holds;
    polled, as ``stats_until`` polls the counters."""
    with anyio.fail_after(within_s):
        while True:
            footprint: dict[str, int] = await owner_call(lambda service: service.footprint())
            if condition(footprint):
                return footprint
            await anyio.sleep(0.005)


def accounted(stats: RerankerStatistics) -> bool:
    """Every rerank started has its outcome counted (the owner loop counts each once, at the latest at
    its deadline; a caller's backstop may return a grace after that, before the count lands)."""
    return stats.reranks == stats.reranked + stats.fallback_total + stats.cancelled


def settled_statistics(within_s: float = 10.0) -> RerankerStatistics:
    """``stats_until(accounted)`` for code that is not on an event loop."""
    deadline = time.monotonic() + within_s
    while True:
        stats = runtime.statistics()
        if accounted(stats) or time.monotonic() > deadline:
            return stats
        time.sleep(0.005)  # polling a counter the owner loop writes; the condition decides
