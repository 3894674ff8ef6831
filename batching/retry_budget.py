"""A retry budget per endpoint: retries and hedges can never multiply the load on a struggling server.

Over a sliding window of ``window_s`` seconds, retries may number at most ``ratio`` times the requests
first sent in that window, or ``reserve``, whichever is more (so a lone recall can still be retried
once or twice). This is the bound Finagle's and gRPC's retry budgets give: a server failing every
request gets at most ``1 + ratio`` times the requests it would get with no retries at all, once more
than ``reserve / ratio`` requests pass in a window. Counts are kept in one-second buckets.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from ..core import deadline as clock

BUCKET_S = 1.0


class RetryBudget:
    def __init__(self, *, ratio: float = 0.2, window_s: float = 10.0, reserve: int = 2,
                 clock: Callable[[], float] = clock.now) -> None:
        self.ratio = ratio
        self.reserve = reserve
        self._buckets = max(1, math.ceil(window_s / BUCKET_S))
        self._clock = clock
        self._window: deque[list[int]] = deque()  # [bucket number, requests, retries], oldest first

    def configure(self, *, ratio: float) -> None:
        self.ratio = ratio

    def record_request(self) -> None:
        """A request went out for the first time."""
        self._bucket()[1] += 1

    def try_spend(self) -> bool:
        """Take one retry (or hedge) from the budget; False when it is spent."""
        bucket = self._bucket()
        requests = sum(b[1] for b in self._window)
        retries = sum(b[2] for b in self._window)
        if retries + 1 > max(self.reserve, self.ratio * requests):
            return False
        bucket[2] += 1
        return True

    def refund(self) -> None:
        """Give back the last retry taken: it turned out to cost the server nothing (a request resent
        from a stale pooled connection that the server then answered on the first try)."""
        for bucket in reversed(self._window):
            if bucket[2] > 0:
                bucket[2] -= 1
                return

    def _bucket(self) -> list[int]:
        number = int(self._clock() // BUCKET_S)
        while self._window and self._window[0][0] <= number - self._buckets:
            self._window.popleft()
        if not self._window or self._window[-1][0] != number:
            self._window.append([number, 0, 0])
        return self._window[-1]
