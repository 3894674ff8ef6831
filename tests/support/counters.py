"""Wait on the engine's counters: they are the tests' only view into the owner loop's state."""

from __future__ import annotations

from collections.abc import Callable

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
