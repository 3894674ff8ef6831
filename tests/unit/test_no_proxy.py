"""Which endpoints go direct although HTTPS_PROXY or HTTP_PROXY is set: NO_PROXY read as curl and requests read
it (names, parent domains, addresses and networks, ``*``), and loopback always, as no proxy elsewhere reaches it."""

from __future__ import annotations

import pytest

from usr.plugins.a0_reranker.core.endpoint_url import proxy_exempt


@pytest.mark.parametrize(("host", "no_proxy"), [
    ("reranker.corp.internal", "reranker.corp.internal"),
    ("reranker.corp.internal", "corp.internal"),
    ("reranker.corp.internal", ".corp.internal"),
    ("RERANKER.Corp.Internal", " other.example , CORP.internal "),
    ("10.1.2.3", "10.0.0.0/8"),
    ("10.1.2.3", "10.1.2.3"),
    ("fd00::5", "fd00::/8"),
    ("api.cohere.com", "*"),
    ("127.0.0.1", ""),
    ("127.5.0.1", ""),
    ("::1", ""),
    ("[::1]", ""),
    ("localhost", ""),
    ("vllm.localhost", ""),
])
def test_these_go_direct(host: str, no_proxy: str) -> None:
    assert proxy_exempt(host, no_proxy)


@pytest.mark.parametrize(("host", "no_proxy"), [
    ("api.cohere.com", ""),
    ("api.cohere.com", "cohere.co"),
    ("notcorp.internal", "corp.internal"),
    ("192.168.1.9", "10.0.0.0/8"),
    ("10.1.2.3", "not-a-network/99"),
    ("api.jina.ai", ",, ,"),
])
def test_these_go_through_the_proxy(host: str, no_proxy: str) -> None:
    assert not proxy_exempt(host, no_proxy)
