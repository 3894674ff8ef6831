"""Hedging: a race between an attempt and its duplicates, the first answer wins and the others are
cancelled; and the window of recent answer times whose percentile sets the delay before a duplicate.

One duplicate goes out after ``delay`` without an answer; when a duplicate fails while the first
attempt is still out, the next one goes out at once, up to ``hedges`` in all. If every attempt fails,
the first attempt's error is the request's (so the retry rules see what the server said to it).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Final

from ..core.statistics import percentile as nearest_rank

Attempt = asyncio.Task[list[float]]
MIN_SAMPLES: Final = 20  # fewer answers than this say nothing reliable about the tail


class LatencyWindow:
    """The last ``size`` successful attempts' latencies of a replica set, in seconds."""

    def __init__(self, size: int = 256) -> None:
        self._samples: deque[float] = deque(maxlen=size)

    def record(self, seconds: float) -> None:
        self._samples.append(seconds)

    def percentile(self, fraction: float) -> float | None:
        """Nearest-rank percentile, or None while too few answers were seen."""
        if len(self._samples) < MIN_SAMPLES:
            return None
        return nearest_rank(sorted(self._samples), fraction)


async def race(first: Attempt, start_hedge: Callable[[], Attempt | None], *, delay: float, hedges: int
               ) -> list[float]:
    pending = {first}
    sent = 0
    timeout: float | None = delay
    try:
        while pending:
            done, pending = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is None:
                    return task.result()
            timeout = None  # from now on only an answer or a failure moves the race on
            if pending == {first} and sent < hedges and (hedge := start_hedge()) is not None:
                pending.add(hedge)
                sent += 1
        return first.result()  # every attempt failed: raise the first one's error
    finally:
        for task in pending:
            _cancel_quietly(task)


def _cancel_quietly(task: Attempt) -> None:
    """Cancel a losing attempt; its outcome is reported by the attempt itself, its error is not ours."""
    task.cancel()
    task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
