"""One clock, and one deadline per call, set when it enters and enforced by the owner loop (docs/architecture.md,
"One clock, one deadline"); a caller on another thread or loop waits ``BACKSTOP_GRACE_S`` longer, against a stuck
owner loop, and counts the outcome it returns."""

from __future__ import annotations

import asyncio
import time
from typing import Final

BACKSTOP_GRACE_S: Final = 0.05


def now() -> float:
    """The running event loop's time, else ``time.monotonic``: the same clock either way."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def deadline_in(seconds: float) -> float:
    return now() + seconds


def backstop_remaining(deadline: float) -> float:
    """How much longer a caller waits for the owner loop's outcome."""
    return max(0.0, deadline + BACKSTOP_GRACE_S - now())
