"""Recent answer times of one endpoint: the hedging delay is read from their percentile."""

from __future__ import annotations

import math
from collections import deque
from typing import Final

MIN_SAMPLES: Final = 20  # fewer answers than this say nothing reliable about the tail


class LatencyWindow:
    """The last ``size`` successful attempts' latencies, in seconds."""

    def __init__(self, size: int = 256) -> None:
        self._samples: deque[float] = deque(maxlen=size)

    def record(self, seconds: float) -> None:
        self._samples.append(seconds)

    def percentile(self, fraction: float) -> float | None:
        """Nearest-rank percentile, or None while too few answers were seen."""
        if len(self._samples) < MIN_SAMPLES:
            return None
        ordered = sorted(self._samples)
        return ordered[min(len(ordered), max(1, math.ceil(fraction * len(ordered)))) - 1]
