"""The only module that touches aiohttp: send a ``WireRequest``, return a ``WireAnswer``, translate errors.

It owns the owner loop's ``ClientSession`` (a pooled one, and one for fresh connections). Every request
has a timeout derived from its absolute deadline, redirects are refused (a POST must not silently become
a GET elsewhere), TLS is verified unless the user turned it off, and at most ``MAX_ANSWER_BYTES`` are
read. aiohttp's and the OS's errors are translated by one table, keeping the cause. A request whose
pooled keep-alive connection the server had already closed is sent once more at once on a fresh one:
the one retry made here (aiohttp's own resend of a GET goes to the pool, where it may meet another
stale connection). An answer that is not HTTP becomes ``NotHttp`` with aiohttp's own reason, which
names what came back (another service on the port, a broken status line, header or chunked body).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Final

import aiohttp
from aiohttp.http_exceptions import ContentLengthError, HttpProcessingError, TransferEncodingError

from .. import __version__
from ..core import deadline as clock
from ..core.dialects import WireAnswer, WireRequest
from ..core.errors import (
    ConfigError,
    DeadlineExceeded,
    MalformedAnswer,
    NotHttp,
    RerankError,
    StaleConnection,
    TlsFailure,
    TransportError,
)

MAX_ANSWER_BYTES: Final = 8 * 1024 * 1024
_CHUNK: Final = 64 * 1024
USER_AGENT: Final = f"a0-reranker/{__version__}"
# Idle keep-alive connections are dropped after this; uvicorn (vLLM, Infinity, TEI's router) and
# llama.cpp close theirs after 5 s, so ours lapse first and a stale one is rare. The rare one left
# (a server closing early) is recognised and sent again at once.
KEEPALIVE_S: Final = 4.0


@dataclass(frozen=True)
class TlsSettings:
    verify: bool = True
    ca_bundle: str = ""


@dataclass(slots=True)
class _Exchange:
    """Per-request trace context: did this request go out on a pooled keep-alive connection?"""

    fresh: bool
    reused: bool = False


async def _on_reuse(session: object, context: SimpleNamespace, params: object) -> None:
    exchange = context.trace_request_ctx
    if isinstance(exchange, _Exchange):
        exchange.reused = True


def _always() -> bool:
    return True


class HttpTransport:
    """Sends requests for the service. Create and use it on one event loop (the owner loop).
    ``on_stale_resend`` hears of each request sent again after a stale connection (to count it)."""

    def __init__(self, *, max_connections: int = 256, on_stale_resend: Callable[[], None] = lambda: None) -> None:
        self._max_connections = max_connections
        self._on_stale_resend = on_stale_resend
        self._sessions: dict[bool, aiohttp.ClientSession] = {}  # fresh -> session
        self._ssl_contexts: dict[TlsSettings, ssl.SSLContext | bool] = {}

    async def send(self, endpoint: str, request: WireRequest, *, deadline: float, api_key: str = "",
                   tls: TlsSettings = TlsSettings(), may_resend: Callable[[], bool] = _always) -> WireAnswer:
        """One HTTP exchange: the answer, or a ``RerankError`` saying why not. Sent again only when the
        pooled connection it went out on had been closed by the server (``StaleConnection``): at once,
        on a fresh connection, if ``may_resend`` agrees (scoring asks its retry budget)."""
        try:
            return await self._send_once(endpoint, request, deadline, api_key, tls, fresh=False)
        except StaleConnection:
            if not may_resend():
                raise
            self._on_stale_resend()
            return await self._send_once(endpoint, request, deadline, api_key, tls, fresh=True)

    async def _send_once(self, endpoint: str, request: WireRequest, deadline: float, api_key: str,
                         tls: TlsSettings, *, fresh: bool) -> WireAnswer:
        """One exchange; ``fresh`` sends it on a new connection rather than a pooled one."""
        remaining = deadline - clock.now()
        if remaining <= 0:
            raise DeadlineExceeded("no time left to send the request")
        exchange = _Exchange(fresh)
        try:
            return await self._exchange(endpoint, request, remaining, api_key, tls, exchange)
        except RerankError:
            raise
        except (TimeoutError, aiohttp.ClientError, HttpProcessingError, OSError) as exc:
            raise translate(exc, endpoint, remaining, reused=exchange.reused) from exc

    async def _exchange(self, endpoint: str, request: WireRequest, remaining: float, api_key: str,
                        tls: TlsSettings, exchange: _Exchange) -> WireAnswer:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        async with self._session(exchange.fresh).request(
            request.method, endpoint + request.path, json=request.body, headers=headers,
            timeout=aiohttp.ClientTimeout(total=remaining), allow_redirects=False, ssl=self._ssl_for(tls),
            trace_request_ctx=exchange,
        ) as response:
            if 300 <= response.status < 400:
                target = response.headers.get("Location", "another address")
                raise TransportError(
                    f"the server redirected to {target}; set the endpoint to the address it redirects to",
                    retryable=False,
                )
            body = await _read_capped(response)
            return WireAnswer(status=response.status, body=body, content_type=response.headers.get("Content-Type", ""),
                              headers={k.lower(): v for k, v in response.headers.items()})

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()

    def _session(self, fresh: bool) -> aiohttp.ClientSession:
        """The pooled session, or (``fresh``) one whose every request opens its own connection."""
        session = self._sessions.get(fresh)
        if session is None or session.closed:
            trace = aiohttp.TraceConfig()
            trace.on_connection_reuseconn.append(_on_reuse)
            if fresh:
                connector = aiohttp.TCPConnector(limit=self._max_connections, force_close=True)
            else:
                connector = aiohttp.TCPConnector(limit=self._max_connections, enable_cleanup_closed=True,
                                                 keepalive_timeout=KEEPALIVE_S)
            session = aiohttp.ClientSession(connector=connector, trust_env=False, trace_configs=[trace])
            self._sessions[fresh] = session
        return session

    def _ssl_for(self, tls: TlsSettings) -> ssl.SSLContext | bool:
        if tls not in self._ssl_contexts:
            self._ssl_contexts[tls] = _build_ssl(tls)
        return self._ssl_contexts[tls]


# --- error translation: aiohttp's and the OS's errors into ours, by table -------------------------------

Translator = Callable[[BaseException, str, float], RerankError]
_BROKEN_CONNECTION: Final = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)

# First match wins, so subclasses come before their bases.
_TRANSLATIONS: Final[tuple[tuple[type[BaseException], Translator], ...]] = (
    (TimeoutError, lambda e, url, s: DeadlineExceeded(f"no answer from {url} within {s:.2f} s")),
    (aiohttp.ClientConnectorCertificateError,
     lambda e, url, s: TlsFailure(f"TLS certificate of {url} was not accepted: "
                                  f"{getattr(e, 'certificate_error', type(e).__name__)}")),
    (aiohttp.ClientSSLError, lambda e, url, s: TlsFailure(f"TLS handshake with {url} failed: {_os_reason(e)}")),
    (aiohttp.ClientConnectorDNSError,
     lambda e, url, s: TransportError(f"cannot resolve the host name of {url}", retryable=False)),
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
    """Our error for ``exc``. A pooled connection that broke before any answer was stale: say so, so
    that it is sent again at once and not held against the server."""
    if reused and isinstance(exc, _BROKEN_CONNECTION) and not isinstance(exc, aiohttp.ClientConnectorError):
        return StaleConnection(f"a kept-alive connection to {endpoint} had been closed by the server")
    for kind, make in _TRANSLATIONS:
        if isinstance(exc, kind):
            return make(exc, endpoint, remaining)
    return TransportError(f"request to {endpoint} failed: {type(exc).__name__}")


def _payload_error(exc: BaseException, url: str) -> RerankError:
    """A body that ended early broke off (the connection went); one that could not be decoded is no
    valid HTTP."""
    if exc.__cause__ is None or isinstance(exc.__cause__, ContentLengthError | TransferEncodingError):
        return TransportError(f"{url} broke off the answer")
    return _not_http(exc, url)


def _not_http(exc: BaseException, url: str) -> NotHttp:
    """aiohttp's reason on one line, without the pointer under its quote: the quote of what came back
    (an SSH banner, a Redis error) is what tells a user they typed the wrong port."""
    source = exc.__cause__ if isinstance(exc.__cause__, HttpProcessingError) else exc
    lines = str(getattr(source, "message", "") or source).splitlines()
    reason = " ".join(line.strip() for line in lines if line.strip(" ^")).rstrip(".")
    if "Expected HTTP/" in reason:  # the status line does not even start as HTTP's does
        return NotHttp(f"{url} does not speak HTTP (is this the reranker's port?): {reason}")
    return NotHttp(f"the answer of {url} is not valid HTTP: {reason}")


def _build_ssl(tls: TlsSettings) -> ssl.SSLContext | bool:
    if not tls.verify:
        return False
    if not tls.ca_bundle:
        return True
    try:
        return ssl.create_default_context(cafile=tls.ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError([f"rerank_ca_bundle: cannot load {tls.ca_bundle!r}: {exc}"]) from None


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    declared = response.content_length
    if declared is not None and declared > MAX_ANSWER_BYTES:
        raise MalformedAnswer(f"the answer is {declared} bytes, more than the {MAX_ANSWER_BYTES} read at most")
    chunks: list[bytes] = []
    size = 0
    while chunk := await response.content.read(_CHUNK):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise MalformedAnswer(f"the answer is larger than the {MAX_ANSWER_BYTES} bytes read at most")
        chunks.append(chunk)
    return b"".join(chunks)


def _os_reason(exc: BaseException) -> str:
    os_error = getattr(exc, "os_error", exc)
    reason = getattr(os_error, "strerror", None) or getattr(os_error, "reason", None)
    return str(reason or type(exc).__name__).lower()
