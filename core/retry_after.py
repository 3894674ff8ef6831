"""Read an HTTP ``Retry-After`` header: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).

A 429 tells us how long to wait before the next request; the dispatch step waits that long when the
wait fits in the caller's deadline, and falls back at once otherwise. A date in the past means "now";
an absurd delay is capped, and text we cannot read counts as no header at all.
"""

from __future__ import annotations

import math
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Final

MAX_RETRY_AFTER_S: Final = 3600.0


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds to wait from ``now_epoch`` (wall-clock seconds, as HTTP dates are), or None."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.replace(".", "", 1).isdigit():
        return _bounded(float(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime dates carry no zone; every HTTP date is GMT
        when = when.replace(tzinfo=UTC)
    return _bounded(when.timestamp() - now_epoch)


def _bounded(seconds: float) -> float | None:
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
