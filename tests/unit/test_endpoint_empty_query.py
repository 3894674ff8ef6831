"""An endpoint ending in a bare ``?`` or ``#`` (pasted from a browser's address bar) has an empty query or
fragment, which ``urlsplit`` reports as none; the plugin appends its paths after it, so every request would go
to the URL's own path with ours as its query. It is refused like any other query or fragment."""

from __future__ import annotations

import pytest

from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.endpoint_url import endpoint_problem
from usr.plugins.a0_reranker.core.errors import ConfigError


@pytest.mark.parametrize("typed", ["http://h:8000/?", "http://h:8000/v1/rerank?", "http://h:8000#", "http://h/v1?#"])
def test_an_empty_query_or_fragment_is_refused(typed: str) -> None:
    assert endpoint_problem(typed) == "must not contain ?query or #fragment"
    with pytest.raises(ConfigError, match=r"\?query or #fragment"):
        RerankerConfig(endpoint=typed)
