"""The only module that touches aiohttp: send a ``WireRequest``, return a ``WireAnswer``, translate errors.

One ``ClientSession`` per owner loop. Every request has an explicit timeout derived from the absolute
deadline it serves, redirects are refused (a POST must not silently become a GET elsewhere), TLS is
verified unless the user turned it off, and at most ``MAX_ANSWER_BYTES`` of an answer are read.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from typing import Final

import aiohttp

from .. import __version__
from ..core.dialects import WireAnswer, WireRequest
from ..core.errors import ConfigError, DeadlineExceeded, MalformedAnswer, TlsFailure, TransportError

MAX_ANSWER_BYTES: Final = 8 * 1024 * 1024
_CHUNK: Final = 64 * 1024
USER_AGENT: Final = f"a0-reranker/{__version__}"


@dataclass(frozen=True)
class TlsSettings:
    verify: bool = True
    ca_bundle: str = ""


class HttpTransport:
    """Sends requests for the service. Create and use it on one event loop (the owner loop)."""

    def __init__(self, *, max_connections: int = 256) -> None:
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._ssl_contexts: dict[TlsSettings, ssl.SSLContext | bool] = {}

    async def send(
        self,
        endpoint: str,
        request: WireRequest,
        *,
        deadline: float,
        api_key: str = "",
        tls: TlsSettings = TlsSettings(),
    ) -> WireAnswer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded("no time left to send the request")
        url = endpoint + request.path
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        try:
            async with self._get_session().request(
                request.method,
                url,
                json=request.body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=remaining),
                allow_redirects=False,
                ssl=self._ssl_for(tls),
            ) as response:
                if 300 <= response.status < 400:
                    target = response.headers.get("Location", "another address")
                    raise TransportError(
                        f"the server redirected to {target}; set the endpoint to the address it redirects to"
                    )
                body = await _read_capped(response)
                return WireAnswer(
                    status=response.status,
                    body=body,
                    content_type=response.headers.get("Content-Type", ""),
                    headers={k.lower(): v for k, v in response.headers.items()},
                )
        except TimeoutError:
            raise DeadlineExceeded(f"no answer from {endpoint} within {remaining:.2f} s") from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise TlsFailure(f"TLS certificate of {endpoint} was not accepted: {exc.certificate_error}") from None
        except aiohttp.ClientSSLError as exc:
            raise TlsFailure(f"TLS handshake with {endpoint} failed: {_os_reason(exc)}") from None
        except aiohttp.ClientConnectorDNSError:
            raise TransportError(f"cannot resolve the host name of {endpoint}") from None
        except aiohttp.ClientConnectorError as exc:
            raise TransportError(f"cannot connect to {endpoint}: {_os_reason(exc)}") from None
        except aiohttp.ServerDisconnectedError:
            raise TransportError(f"{endpoint} closed the connection without answering") from None
        except aiohttp.ClientPayloadError:
            raise TransportError(f"{endpoint} broke off the answer") from None
        except aiohttp.InvalidURL:
            raise ConfigError([f"rerank_endpoint: {endpoint!r} is not a valid URL"]) from None
        except aiohttp.ClientError as exc:
            raise TransportError(f"request to {endpoint} failed: {type(exc).__name__}") from None
        except OSError as exc:
            raise TransportError(f"request to {endpoint} failed: {exc.strerror or type(exc).__name__}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._session

    def _ssl_for(self, tls: TlsSettings) -> ssl.SSLContext | bool:
        if tls not in self._ssl_contexts:
            self._ssl_contexts[tls] = _build_ssl(tls)
        return self._ssl_contexts[tls]


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


def _os_reason(exc: aiohttp.ClientConnectorError | aiohttp.ClientSSLError) -> str:
    os_error = getattr(exc, "os_error", None)
    reason = getattr(os_error, "strerror", None) or getattr(os_error, "reason", None)
    return str(reason or type(exc).__name__).lower()
