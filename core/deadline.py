"""One deadline per call: computed once when the call enters, enforced by the owner loop alone.

The owner loop enforces it (the batcher's timer per caller, the transport's timeout per request,
each detection's own) and decides, and counts, the outcome. A caller on another thread or loop waits
for that outcome ``BACKSTOP_GRACE_S`` longer than the deadline, as a backstop against an owner loop
that is stuck, and never counts anything itself.
"""

from __future__ import annotations

import time
from typing import Final

BACKSTOP_GRACE_S: Final = 0.05


def deadline_in(seconds: float) -> float:
    """The absolute (monotonic) deadline ``seconds`` from now."""
    return time.monotonic() + seconds


def backstop_remaining(deadline: float) -> float:
    """How much longer a caller waits for the owner loop's outcome."""
    return max(0.0, deadline + BACKSTOP_GRACE_S - time.monotonic())
