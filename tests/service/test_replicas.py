"""Several replicas of one model behind ``rerank_endpoint`` (issue: replicas): each detected on its own,
requests balanced over them, a failed request sent on to another at once, a stalled one hedged on
another, every replica ejected: stock at once. Through the public API against loopback servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from support.encoding import encoding_scorer, recall
from support.outages import OVERLOADED, closed_port_url
from support.servers import Delay, Disconnect, RecordedRequest, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio


@pytest.fixture
async def three() -> AsyncIterator[list[RunningServer]]:
    servers = [await start_server("vllm", scorer=encoding_scorer) for _ in range(3)]
    yield servers
    for server in servers:
        await server.close()


def config_for(*urls: str, **settings: Any) -> RerankerConfig:
    return RerankerConfig(endpoint=", ".join(urls), api="rerank", **{"timeout": 5.0, **settings})


def posts(server: RunningServer) -> int:
    return sum(1 for r in server.requests if r.method == "POST")


def expected(n: int = 4) -> list[int]:
    return list(range(n - 1, -1, -1))  # the encoding scorer ranks later memories higher


async def recalls(config: RerankerConfig, queries: range, concurrency: int = 12) -> list[Any]:
    """The results, ``concurrency`` recalls at a time."""
    results: list[Any] = []
    for first in range(queries.start, queries.stop, concurrency):
        batch = range(first, min(first + concurrency, queries.stop))
        results += await asyncio.gather(*(runtime.rerank_result_async(*recall(q, 4), config=config) for q in batch))
    return results


def assert_all_reranked(results: list[Any]) -> None:
    """Each in the server's order; a fallback's reason is in the failure message."""
    fallbacks = [f"{r.reason}: {r.message}" for r in results if r.ranking is None]
    assert not fallbacks, fallbacks
    assert all([i for i, _ in r.ranking] == expected() for r in results)


async def test_requests_are_spread_over_every_replica(three: list[RunningServer]) -> None:
    config = config_for(*(s.url for s in three))
    assert_all_reranked(await recalls(config, range(1, 121)))
    counts = [posts(s) for s in three]
    assert all(count >= 10 for count in counts), counts  # 120 recalls: none of the three left idle
    shown = {r.url: r for r in runtime.statistics().replicas}
    assert all(shown[s.url].pairs > 0 and shown[s.url].breaker == "closed" for s in three)


async def test_a_slow_replica_gets_a_smaller_share_by_itself(three: list[RunningServer]) -> None:
    """The balancer weighs each replica by its own measured seconds per pair, so what decides is how much
    slower the slow one is than the fast ones *on this machine now*: a busy machine slows the fast ones
    too. 300 ms more per request keeps it ten times slower even when a loopback answer takes 30 ms
    (found with 100 ms: three fifths of the fast ones' share on a loaded machine, not under half)."""
    slow = three[2]
    slow.set_fault(lambda r: Delay(0.3) if r.method == "POST" else None)
    config = config_for(*(s.url for s in three), hedge="off")
    assert_all_reranked(await recalls(config, range(1, 241)))
    pairs = {r.url: r.pairs for r in runtime.statistics().replicas}
    fast = min(pairs[three[0].url], pairs[three[1].url])
    assert pairs[slow.url] < 0.5 * fast, pairs


async def test_each_replica_is_detected_on_its_own_and_speaks_its_own_dialect() -> None:
    tei = await start_server("tei", scorer=encoding_scorer, max_client_batch_size=8)
    vllm = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = config_for(tei.url, vllm.url)
        assert_all_reranked(await recalls(config, range(1, 41), concurrency=8))
        assert posts(tei) > 0 and posts(vllm) > 0
        assert all(len(r.json["texts"]) <= 8 for r in tei.requests if r.path == "/rerank")
        assert all("documents" in r.json for r in vllm.requests if r.path == "/rerank")
    finally:
        await tei.close()
        await vllm.close()


def fail_from_now(fault: Any) -> Any:
    return lambda request: fault if request.method == "POST" else None


@pytest.mark.parametrize("fault", [OVERLOADED, Disconnect()], ids=["503", "reset"])
async def test_a_failed_request_goes_on_to_another_replica_at_once(three: list[RunningServer], fault: Any) -> None:
    # Hedging off: on a loaded machine slow answers drew hedges that spent the budget this test is about.
    config = config_for(*(s.url for s in three), hedge="off")
    # Every replica detected, and enough requests in the retry budget's window that failing over the
    # requests of the first moments (before the failing replica looks costly) fits in its 20%.
    assert_all_reranked(await recalls(config, range(1, 61)))
    broken = three[0]
    before = posts(broken)
    broken.set_fault(fail_from_now(fault))
    rounds = 0
    while rounds == 0 or (posts(broken) == before and rounds < 5):  # until the balancer has tried it
        assert_all_reranked(await recalls(config, range(100 + 60 * rounds, 160 + 60 * rounds)))
        rounds += 1
    stats = runtime.statistics()
    assert stats.fallback_total == 0 and stats.failovers > 0 and stats.retry_budget_exhausted == 0
    # Its failures make it look costly at once, so it gets few of each 60 (a third would be 20), and
    # its breaker ejects it when it gets enough.
    assert stats.breakers[broken.url] == "open" or posts(broken) - before <= 12 * rounds, posts(broken) - before


async def test_a_replica_refusing_connections_is_ejected_and_the_others_answer(three: list[RunningServer]) -> None:
    dead = closed_port_url()
    config = config_for(three[0].url, dead, three[1].url, breaker_cooldown=60)
    assert_all_reranked(await recalls(config, range(1, 61)))
    stats = runtime.statistics()
    assert stats.breakers[dead] == "open" and stats.fallback_total == 0


async def test_every_replica_ejected_gives_stock_at_once() -> None:
    config = config_for(closed_port_url(), closed_port_url(), timeout=1.0, breaker_cooldown=60)
    for q in range(6):
        assert await runtime.rerank_async(*recall(q, 4), config=config) is None
    stats = runtime.statistics()
    assert {stats.breakers[url] for url in config.endpoints} == {"open"}
    assert stats.fallbacks.get("breaker_open", 0) >= 1


def own_posts(server: RunningServer, query: str) -> list[RecordedRequest]:
    return [r for r in server.requests if r.method == "POST" and query in r.text]


async def test_a_stalled_request_is_hedged_on_another_replica(three: list[RunningServer]) -> None:
    """Sequenced by the servers' gates, not by time. Each replica is detected and measured alone, where
    hedging is off: on a busy machine warm-up answers slower than 50 ms were hedged, and those hedges spent
    the retry budget the stalled request's hedge needed (no hedge, a timeout). Only the recall's own request
    is held, so no warm-up request arriving late takes the stall."""
    pair = three[:2]
    for first, server in zip((1, 16), pair, strict=True):  # both routes known before the pair's first recall
        assert_all_reranked(await recalls(config_for(server.url, hedge="off"), range(first, first + 15)))
    query, documents = recall(100, 4)  # in no warm-up request
    for server in pair:
        server.gate.hold(lambda r: r.method == "POST" and query in r.text)
    config = config_for(*(s.url for s in pair), hedge_delay_ms=50)  # hedging: auto, so on with two
    asked = asyncio.ensure_future(runtime.rerank_result_async(query, documents, config=config))
    for server in pair:
        await server.gate.wait_held(1)  # the request stalls on one replica, its hedge reaches the other
    stalled, other = sorted(pair, key=lambda s: own_posts(s, query)[0].received_at)
    other.gate.release()
    result = await asked
    assert result.ranking is not None and [i for i, _ in result.ranking] == expected()
    assert result.failover_to == other.url and runtime.statistics().hedges == 1
    await stalled.wait_until(lambda s: s.in_flight == 0)  # the stalled loser was cancelled
    assert [len(own_posts(s, query)) for s in pair] == [1, 1]
