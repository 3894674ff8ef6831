"""What the proxy tests share: made-up names only the stand-in proxy resolves, the secrets that must never show,
and the environment with no proxy variable of the developer's."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from support.servers import RunningServer

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
                   "ALL_PROXY", "all_proxy")
HOSTED_NAME = "rerank.corp.test"  # RFC 6761 .test: no resolver but the proxy's table knows it
LAN_NAME = "reranker.corp.test"
KEY = "co-key-0123456789abcdef"
PROXY_PASSWORD = "pr0xy-pa55-DO-NOT-LEAK"


def without_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The body of each proxy test module's ``environment`` fixture: the test sets what it needs on it."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch


def address(server: RunningServer) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port
