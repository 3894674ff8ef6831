"""Time in the tests of "a caller is released at its deadline", on a shared and busy machine.

A test proves a release by events and counters: the server holds the request (a gate, ``Hang``) or would
answer only long after, the server's record shows the request arrived, and the counters name the reason.
Time is checked only with bounds that a loaded 2-core machine cannot break:

- ``assert_released_at_deadline``: not before the deadline (less a timer's tolerance; load only makes a
  release later), and before ``sanity_bound``;
- ``assert_released_within``: before ``sanity_bound``, for a call that may retry up to its deadline;
- ``assert_released_before_deadline``: a call that must not wait at all (an open breaker, a Retry-After
  that cannot fit) comes back before its deadline would have released it.

A call that must succeed (a warm-up that detects the API, a check that the engine recovered) gets
``PATIENT_S``: a short timeout would make it race the clock. Detection and the endpoint's slots, breaker
and queue do not depend on the timeout, so the patient call shares them with the impatient ones.

How close to the deadline a release is (the contract's "within rerank_timeout + 100 ms") is measured by
``python -m a0_reranker.bench.deadline_release``, as percentiles of one run, not asserted here.
"""

from __future__ import annotations

import time
from typing import Final

PATIENT_S: Final = 10.0  # the timeout of a call that must succeed (a warm-up, a check after): not under test
EARLY_S: Final = 0.02  # a margin for a timer that fires a hair early (asyncio wakes timers within its clock resolution)
LEAST_SLACK_S: Final = 1.0  # what a busy machine may add to a release, at the least


def sanity_bound(timeout: float) -> float:
    """The next multiple of the timeout, and at least a second after the deadline: a caller still waiting
    then waited for something other than its deadline (the server's late answer, a lost wake-up)."""
    return timeout + max(timeout, LEAST_SLACK_S)


class Stopwatch:
    """Monotonic seconds since it was made."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


def assert_released_at_deadline(elapsed: float, timeout: float, *, more: float = 0.0) -> None:
    """Released by its deadline: not before it, and well before a second timeout could end. ``more`` is
    what the caller's own work around the rerank cost, measured on the same machine just before."""
    assert timeout - EARLY_S <= elapsed < sanity_bound(timeout) + more, (elapsed, timeout, more)


def assert_released_within(elapsed: float, timeout: float, *, more: float = 0.0) -> None:
    """Back within the timeout, for a call that may retry until its deadline: before ``sanity_bound``."""
    assert elapsed < sanity_bound(timeout) + more, (elapsed, timeout, more)


def assert_released_before_deadline(elapsed: float, timeout: float) -> None:
    assert elapsed < timeout, (elapsed, timeout)


class ManualClock:
    """An injected clock (the service's, the breakers', the counters'): time passes only when the test sets
    ``now``, so a cooldown, a route's age or a window ends at the instant the test chooses."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
