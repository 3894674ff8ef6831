"""aiohttp's and the OS's errors translated into the engine's by one table, keeping the cause."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final
from urllib.parse import urlsplit

import aiohttp
from aiohttp.http_exceptions import ContentLengthError, HttpProcessingError, TransferEncodingError

from ..core.errors import (
    ConfigError,
    DeadlineExceeded,
    NotHttp,
    RerankError,
    StaleConnection,
    TlsFailure,
    TransportError,
)

Translator = Callable[[BaseException, str, float], RerankError]
_BROKEN_CONNECTION: Final = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)

# First match wins, so subclasses come before their bases.
_TRANSLATIONS: Final[tuple[tuple[type[BaseException], Translator], ...]] = (
    (TimeoutError, lambda e, url, s: DeadlineExceeded(f"no answer from {url} within {s:.2f} s")),
    (aiohttp.ClientConnectorCertificateError,
     lambda e, url, s: TlsFailure(f"TLS certificate of {url} was not accepted: "
                                  f"{getattr(e, 'certificate_error', type(e).__name__)}")),
    (aiohttp.ClientSSLError, lambda e, url, s: TlsFailure(f"TLS handshake with {url} failed: {_os_reason(e)}")),
    (aiohttp.ClientProxyConnectionError,
     lambda e, url, s: TransportError(f"cannot connect to the proxy that HTTPS_PROXY, HTTP_PROXY or ALL_PROXY names "
                                      f"for {url}: {_os_reason(e)}")),
    (aiohttp.ClientHttpProxyError,
     lambda e, url, s: proxy_refused(url, getattr(e, "status", 0), str(getattr(e, "message", "")))),
    (aiohttp.ClientConnectorDNSError, lambda e, url, s: _unresolved(e, url)),
    (aiohttp.ClientConnectorError, lambda e, url, s: TransportError(f"cannot connect to {url}: {_os_reason(e)}")),
    (aiohttp.ServerDisconnectedError,
     lambda e, url, s: TransportError(f"{url} closed the connection without answering")),
    (aiohttp.ClientPayloadError, lambda e, url, s: _payload_error(e, url)),
    (aiohttp.ClientResponseError, lambda e, url, s: _not_http(e, url)),
    (aiohttp.InvalidURL, lambda e, url, s: ConfigError([f"rerank_endpoint: {url!r} is not a valid URL"])),
    (aiohttp.ClientOSError, lambda e, url, s: TransportError(f"the connection to {url} broke: {_os_reason(e)}")),
    (aiohttp.ClientError, lambda e, url, s: TransportError(f"request to {url} failed: {type(e).__name__}")),
    (HttpProcessingError, lambda e, url, s: _not_http(e, url)),  # aiohttp's pure-Python parser lets some out
    (OSError, lambda e, url, s: TransportError(f"request to {url} failed: {_os_reason(e)}")),
)


def translate(exc: BaseException, endpoint: str, remaining: float, *, reused: bool = False) -> RerankError:
    """A pooled connection that broke before any answer was stale: so told, it is sent again at once and not
    held against the server."""
    if reused and isinstance(exc, _BROKEN_CONNECTION) and not isinstance(exc, aiohttp.ClientConnectorError):
        return StaleConnection(f"a kept-alive connection to {endpoint} had been closed by the server")
    for kind, make in _TRANSLATIONS:
        if isinstance(exc, kind):
            return make(exc, endpoint, remaining)
    return TransportError(f"request to {endpoint} failed: {type(exc).__name__}")


def proxy_refused(url: str, status: int, reason: str) -> TransportError:
    """Retryable only for a 5xx: a 407 wants other credentials, which sending again cannot give."""
    reason = " ".join(reason.split())
    return TransportError(f"the proxy refused to connect to {url}: HTTP {status} {reason}".rstrip(),
                          retryable=status >= 500)


def _unresolved(exc: BaseException, url: str) -> TransportError:
    """The endpoint's host name did not resolve, or the proxy's: aiohttp raises the same error for both."""
    if (host := getattr(exc, "host", None)) and host != urlsplit(url).hostname:
        return TransportError(f"cannot resolve {host}, the proxy that HTTPS_PROXY, HTTP_PROXY or ALL_PROXY names "
                              f"for {url}", retryable=False)
    return TransportError(f"cannot resolve the host name of {url}", retryable=False)


def _payload_error(exc: BaseException, url: str) -> RerankError:
    """A body that ended early broke off (the connection went); one that could not be decoded is no valid HTTP."""
    if exc.__cause__ is None or isinstance(exc.__cause__, ContentLengthError | TransferEncodingError):
        return TransportError(f"{url} broke off the answer")
    return _not_http(exc, url)


def _not_http(exc: BaseException, url: str) -> NotHttp:
    """aiohttp's reason on one line, without the pointer under its quote: the quote of what came back (an SSH
    banner, a Redis error) tells a user they typed the wrong port."""
    source = exc.__cause__ if isinstance(exc.__cause__, HttpProcessingError) else exc
    lines = str(getattr(source, "message", "") or source).splitlines()
    reason = " ".join(line.strip() for line in lines if line.strip(" ^")).rstrip(".")
    if "Expected HTTP/" in reason:  # the status line does not even start as HTTP's does
        return NotHttp(f"{url} does not speak HTTP (is this the reranker's port?): {reason}")
    return NotHttp(f"the answer of {url} is not valid HTTP: {reason}")


def _os_reason(exc: BaseException) -> str:
    os_error = getattr(exc, "os_error", exc)
    reason = getattr(os_error, "strerror", None) or getattr(os_error, "reason", None)
    return str(reason or type(exc).__name__).lower()
