"""One clock, and one deadline per call: computed once when the call enters, enforced by the owner loop
(the batcher's timer per caller, the transport's timeout per request, each detection's own). Why one
clock, and what reads it: docs/architecture.md, "One clock, one deadline".

A caller on another thread or loop waits ``BACKSTOP_GRACE_S`` longer than the deadline, as a backstop
against an owner loop that is stuck, and counts the outcome it returns: the owner loop's, or the timeout.
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
