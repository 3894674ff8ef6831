"""A circuit breaker per endpoint: stop paying the timeout on every recall while a server is down.

Closed: requests flow; ``failures`` consecutive failed requests open it. Open: every call is refused
at once. After ``cooldown`` seconds the next call is let through alone as a probe (half-open); its
success closes the breaker, its failure opens it for another cooldown. Used on the owner loop only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

State = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    def __init__(self, *, failures: int, cooldown: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.failures = failures
        self.cooldown = cooldown
        self._clock = clock
        self._state: State = "closed"
        self._consecutive = 0
        self._opened_at = 0.0
        self._probe_out = False

    def configure(self, *, failures: int, cooldown: float) -> None:
        """Settings may change between calls; the next decision uses the new thresholds."""
        self.failures = failures
        self.cooldown = cooldown

    @property
    def state(self) -> State:
        if self._state == "open" and self._clock() - self._opened_at >= self.cooldown:
            return "half_open"
        return self._state

    def allow(self) -> bool:
        """Whether a call may go to the server now. In half-open state only one probe is let through."""
        state = self.state
        if state == "closed":
            return True
        if state == "half_open" and not self._probe_out:
            self._state = "half_open"
            self._probe_out = True
            return True
        return False

    def record_success(self) -> None:
        self._state = "closed"
        self._consecutive = 0
        self._probe_out = False

    def record_failure(self) -> None:
        self._consecutive += 1
        if self._state == "half_open" or self._consecutive >= self.failures:
            self._state = "open"
            self._opened_at = self._clock()
        self._probe_out = False

    def release_probe(self) -> None:
        """The probe call ended without reaching the server (e.g. cancelled): let another try."""
        self._probe_out = False
