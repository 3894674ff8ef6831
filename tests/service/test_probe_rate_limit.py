"""A live test (Test connection, the status tool, ``a0-reranker probe``) is a request like any other: it keeps to
the hold a server's 429 asked for, and the 429 it gets itself holds the recalls back. Without this, an agent
asking for the reranker's status while a hosted API's key is over its limit sent the probe's requests anyway,
and a Retry-After the probe was given was news to no recall.

Against the Cohere stand-in on the real owner loop, sequenced by the server's recorded requests; no wait here
is shorter than the hold it checks, so a busy machine cannot pass or fail it by timing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from support.counters import accounted, stats_until
from support.encoding import encoding_scorer, recall
from support.servers import RecordedRequest, Respond, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

KEY = "trial-key"
HOLD_S = 120  # far past every deadline here
LIMITED = Respond(429, {"message": "You are using a Trial key, which is limited to 10 API calls / minute."},
                  headers={"Retry-After": str(HOLD_S)})


def posts(server: RunningServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.method == "POST"]


def over_the_limit(server: RunningServer) -> None:
    server.set_fault(lambda r: LIMITED if r.method == "POST" else None)


def cohere_config(server: RunningServer) -> RerankerConfig:
    return RerankerConfig(endpoint=server.url, api_key=KEY, model="rerank-v3.5", timeout=5.0, max_retries=0)


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    running = await start_server("cohere", api_key=KEY, scorer=encoding_scorer)
    yield running
    await running.close()


async def test_a_probe_sends_nothing_while_a_recall_s_retry_after_holds_the_server(server: RunningServer) -> None:
    config = cohere_config(server)
    assert await runtime.rerank_async(*recall(0, 4), config=config) is not None  # detected, answered
    over_the_limit(server)
    assert await runtime.rerank_async(*recall(1, 4), config=config) is None  # its 429 asks for two minutes
    sent = len(posts(server))

    report = await runtime.probe_async(config)
    assert len(posts(server)) == sent  # nothing went to a server that asked us to wait
    assert not report.ok
    assert "Retry-After" in report.message and "wait" in report.message
    assert f"wait {HOLD_S} s more" in report.message, report.message  # whole seconds, as the server said it
    assert KEY not in repr(report.as_dict())


async def test_a_probe_s_own_retry_after_holds_the_recalls_back(server: RunningServer) -> None:
    config = cohere_config(server)
    over_the_limit(server)
    report = await runtime.probe_async(config)  # the live test meets the limit first
    assert not report.ok
    sent = len(posts(server))
    assert sent >= 1

    assert await runtime.rerank_async(*recall(0, 4), config=config) is None
    assert len(posts(server)) == sent  # the recall kept to the probe's Retry-After: nothing sent
    assert (await stats_until(accounted)).fallbacks == {"rate_limited": 1}


async def test_a_probe_under_another_key_is_not_held_by_this_one_s_limit(server: RunningServer) -> None:
    """The hold belongs to the key that was refused: a new key, being tested before it is saved, goes out."""
    config = cohere_config(server)
    over_the_limit(server)
    assert await runtime.rerank_async(*recall(0, 4), config=config) is None  # detection's 429 holds this key
    server.set_fault(None)
    sent = len(posts(server))
    report = await runtime.probe_async(config.replace(api_key="another-key"))
    assert len(posts(server)) > sent  # probed, under its own key
    assert not report.ok  # the stand-in accepts only KEY: refused, not held
    assert "Retry-After" not in report.message
