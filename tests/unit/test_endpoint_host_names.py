"""A host whose name is also an API path (a compose service called ``rerank`` on port 80, TEI's default) is the
server, not a pasted path: only the URL's path is trimmed."""

from __future__ import annotations

import pytest

from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.endpoint_url import normalize_endpoint, split_endpoints


@pytest.mark.parametrize(
    ("typed", "base"),
    [
        ("http://rerank", "http://rerank"),
        ("http://rerank/", "http://rerank"),
        ("http://reranking/v1/rerank", "http://reranking"),
        ("http://score:80", "http://score"),
        ("http://v1", "http://v1"),
        ("https://h/rerank", "https://h"),
    ],
)
def test_a_host_named_like_an_api_path_is_kept(typed: str, base: str) -> None:
    assert normalize_endpoint(typed) == base
    assert normalize_endpoint(base) == base  # idempotent: ``replace`` and each replica normalise again


def test_a_config_aimed_at_a_host_named_rerank_keeps_its_host() -> None:
    config = RerankerConfig(endpoint="http://rerank:80, http://score")
    assert config.endpoints == ("http://rerank", "http://score")
    assert config.replace(timeout=5.0).endpoints == ("http://rerank", "http://score")
    assert split_endpoints("http://rerank") == ("http://rerank",)
