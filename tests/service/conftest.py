"""Service-tier fixtures: the real owner loop, real loopback servers, counters reset per test, and no
concurrency slot given back that was not held (the limiter raises; in a task's done callback, asyncio
logs it rather than raising it into the test)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from support.encoding import encoding_scorer
from support.servers import RunningServer, start_server
from usr.plugins.a0_reranker.batching.queue import SlotNotHeld
from usr.plugins.a0_reranker.service import runtime


@pytest.fixture(autouse=True)
def fresh_counters() -> Iterator[None]:
    runtime.stats_recorder().reset()
    yield


@pytest.fixture(autouse=True)
def slots_given_back_once(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    yield
    wrong = [r.getMessage() for r in caplog.get_records("call")
             if r.exc_info is not None and isinstance(r.exc_info[1], SlotNotHeld)]
    assert not wrong, wrong


@pytest.fixture
async def vllm_server() -> AsyncIterator[RunningServer]:
    """A loopback vLLM server whose scores say which pair was scored (``support.encoding``)."""
    started = await start_server("vllm", scorer=encoding_scorer)
    yield started
    await started.close()
