"""One clock, and one deadline per call: computed once when the call enters, enforced by the owner loop.

The clock (``now``) is the one everything in the engine reads time from: deadlines, the batch window,
breaker cooldowns, the retry budget's buckets, backoff, Retry-After, hedge delays and the speeds and
failures learnt per replica. On an event loop it is that loop's own time, the clock its timers and
sleeps run on, so a test that gives the loop a virtual clock drives all of them together; off a loop
(a caller's thread, a status read) it is ``time.monotonic``, which is what an asyncio loop's time is
unless a test changes it.

The owner loop enforces the deadline (the batcher's timer per caller, the transport's timeout per
request, each detection's own). A caller on another thread or loop waits for its outcome
``BACKSTOP_GRACE_S`` longer than the deadline, as a backstop against an owner loop that is stuck,
and counts the outcome it returns: the owner loop's, or the timeout.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

BACKSTOP_GRACE_S: Final = 0.05


def now() -> float:
    """The engine's clock, in seconds (monotonic): the running event loop's time, else ``time.monotonic``."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def deadline_in(seconds: float) -> float:
    """The absolute deadline ``seconds`` from now."""
    return now() + seconds


def backstop_remaining(deadline: float) -> float:
    """How much longer a caller waits for the owner loop's outcome."""
    return max(0.0, deadline + BACKSTOP_GRACE_S - now())
