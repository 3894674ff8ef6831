"""What one failed attempt says: about the server's health (for the breaker) and whether to send again.

- ``down``: the server is not there or not answering (refused, reset, TLS, no answer in time, no
  usable API at all). A few of these in a row open the breaker.
- ``failure``: the server answered, badly (5xx, 4xx, an answer that breaks the protocol). Counted in
  the breaker's failure rate.
- ``neutral``: nothing about its health: a 429 (slow down), an input the model refuses, a stale pooled
  connection, our own settings, a cancelled attempt.

Retry kinds: ``now`` (a stale pooled connection: on to another replica at once; with none, the
transport has already sent it once more on a fresh connection, or the retry budget said no),
``backoff`` (connection errors and 502/503/504: jittered exponential backoff), ``retry_after`` (429)
and ``never`` (other 4xx, malformed answers, an attempt that ran out of time, too-long input, which
has its own path). Scoring is idempotent, so sending a request again is always safe.
"""

from __future__ import annotations

from typing import Final, Literal

from ..core.errors import (
    ConfigError,
    DeadlineExceeded,
    DetectionFailed,
    InputTooLong,
    RateLimited,
    ServerError,
    StaleConnection,
    TransportError,
)

Health = Literal["success", "down", "failure", "neutral"]
RetryKind = Literal["now", "backoff", "retry_after", "never"]

RETRYABLE_STATUSES: Final = frozenset({502, 503, 504})


def health_of(exc: BaseException) -> Health:
    if isinstance(exc, StaleConnection | RateLimited | InputTooLong | ConfigError):
        return "neutral"
    if isinstance(exc, TransportError | DeadlineExceeded | DetectionFailed):
        return "down"
    return "failure"


def retry_kind(exc: BaseException) -> RetryKind:
    if isinstance(exc, StaleConnection):
        return "now"  # to another replica at once; the transport already sent it again to this one, or not
    if isinstance(exc, RateLimited):
        return "retry_after"
    if isinstance(exc, InputTooLong):
        return "never"
    if isinstance(exc, ServerError):
        return "backoff" if exc.status in RETRYABLE_STATUSES else "never"
    if isinstance(exc, TransportError):
        return "backoff" if exc.retryable else "never"
    return "never"
