"""The one error tree of the engine: transport and dialect failures are translated into it at one boundary
each, so the service names a fallback reason without knowing aiohttp or any wire format."""

from __future__ import annotations

from typing import Final

from .redaction import redact


class RerankError(Exception):
    """Base of every error the engine raises internally (never past the public API), counted by ``reason``."""

    reason = "error"
    # The text may quote a server or a library, and so the key, the query or a memory. The engine's own
    # messages for the refusals that come in floods (a full queue, an open breaker) stay cheap, unmasked.
    quotes_server_text = True

    def __init_subclass__(cls, reason: str = "", quotes_server_text: bool = True) -> None:
        super().__init_subclass__()
        cls.reason = reason or cls.reason
        cls.quotes_server_text = cls.quotes_server_text and quotes_server_text

    def masked(self, *texts: str) -> RerankError:
        """A copy with every quote of ``texts`` masked, without the cause that could still hold them (a request
        carrying several recalls fails for all of them: each sees all their texts masked)."""
        if not self.quotes_server_text:
            return self
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.args = (redact(str(self), *texts),)
        if isinstance(message := self.__dict__.get("message"), str):
            clone.message = redact(message, *texts)  # type: ignore[attr-defined]
        clone.__suppress_context__ = True
        return clone


class ConfigError(RerankError, ValueError, reason="config"):
    """Settings are missing or invalid; ``problems`` lists one readable line per bad key."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class TransportError(RerankError, reason="connect"):
    """The server could not be reached or the connection broke; not ``retryable`` for a redirect or unknown host."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        self.retryable = retryable
        super().__init__(message)


class StaleConnection(TransportError):
    """A pooled keep-alive connection the server had closed: sent again at once, the server not blamed."""


class TlsFailure(TransportError, reason="tls"):
    """The TLS handshake failed; counted apart from ``connect`` as the fix differs (a CA bundle)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class DeadlineExceeded(RerankError, reason="timeout"):
    """No answer before the deadline."""


# Statuses refusing the API key (498: Cohere's invalid token) or the account behind it (402), and those saying
# the route no longer holds (the API moved, the key or model changed)
KEY_REFUSAL_STATUSES: Final = frozenset({401, 402, 403, 498})
ROUTE_GONE_STATUSES: Final = frozenset({401, 403, 404, 405, 498, 501})


class ServerError(RerankError, reason="http_status"):
    """The server answered with a non-success status; ``message`` is its own error text, trimmed."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"HTTP {status}: {message}" if message else f"HTTP {status}")

    @property
    def route_gone(self) -> bool:
        """The route no longer holds: detect again. Not on 5xx: a crashing server still speaks the same API, and
        forgetting its route would send every waiting recall to detect again."""
        return self.status in ROUTE_GONE_STATUSES


class RateLimited(ServerError, reason="rate_limited"):
    """429: slow down, for ``retry_after`` seconds when it says; not a sign that the server is down. ``overloaded``:
    a self-hosted server's own permits or queue were full for now (TEI, Infinity), not a hosted API's quota."""

    def __init__(self, status: int, message: str, retry_after: float | None = None, *,
                 overloaded: bool = False) -> None:
        self.retry_after = retry_after
        self.overloaded = overloaded
        super().__init__(status, message)


class InputTooLong(ServerError, reason="input_too_long"):
    """The server refused the input as too long: retried once with tighter cuts."""


class TooManyTexts(ServerError):
    """The server takes fewer texts a request than its route sends (TEI or Infinity restarted with a smaller
    client batch size): ``limit``, the most it said it takes, caps the route; says nothing of its health."""

    def __init__(self, status: int, message: str, limit: int) -> None:
        self.limit = limit
        super().__init__(status, message)

    @property
    def route_gone(self) -> bool:
        return True


class MalformedAnswer(RerankError, reason="malformed"):
    """The answer was not what the protocol promises (bad JSON, wrong count, bad indices or scores)."""


class NotHttp(MalformedAnswer):
    """Not HTTP, or HTTP breaking its rules (most often another service on the port): not down, resending can't help."""


class DetectionFailed(RerankError, reason="detection"):
    """No protocol answered correctly at the endpoint; ``attempts`` says what each candidate did."""

    def __init__(self, message: str, attempts: tuple[str, ...] = ()) -> None:
        self.attempts = attempts
        super().__init__(message)


class KeyRefused(DetectionFailed, reason="http_status"):
    """Detection met a refused API key or account (``KEY_REFUSAL_STATUSES``): the settings need a fix, not the
    model. For the breaker a failed detection still, so a refused key is not sent again and again."""


class BlankQuery(RerankError, reason="bad_input", quotes_server_text=False):
    """The query is blank as cut: there is nothing to rank against, and some servers refuse it."""


class QueueFull(RerankError, reason="queue_full", quotes_server_text=False):
    """The local queue is full: the recall falls back at once rather than waiting."""


class Overloaded(RerankError, reason="overload", quotes_server_text=False):
    """The servers are busy past this recall's deadline: it gets its stock result now, and no request is spent
    on an answer nobody would read. Says nothing of their health."""


class BreakerOpen(RerankError, reason="breaker_open", quotes_server_text=False):
    """The endpoint failed repeatedly; calls skip it until the breaker's probe succeeds."""
