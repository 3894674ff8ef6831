"""Service-tier fixtures: the real owner loop, real loopback servers, counters reset per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from usr.plugins.a0_reranker.service import runtime


@pytest.fixture(autouse=True)
def fresh_counters() -> Iterator[None]:
    runtime.stats_recorder().reset()
    yield
