"""Many replicas, many keys (issue 21, finding 4): a server's health outlives the state kept per
configuration.

With 50 replicas of which 49 are down, or 11 agent profiles with their own keys over 3 replicas, a
dead server's breaker stays open from one recall to the next: once ejected it receives nothing (its
breaker's probes aside; the cooldown here outlasts every test), no recall runs a detection against
it, and the status lists every replica. Counters decide: the requests that reached each server and
the detections run. A side-by-side timing ratio is a sanity bound only.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from support.counters import footprint_until, owner_call
from support.deadlines import ManualClock
from support.encoding import encoding_scorer, recall
from support.outages import closed_port_url
from support.servers import Hang, Respond, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

NO_PROBE_S = 600.0  # a breaker cooldown longer than any test: an ejected server is probed by none


@pytest.fixture(autouse=True)
def fresh_engine() -> Iterator[None]:
    """The engine keeps what it learned of a server for as long as it runs: a fresh one after each test,
    so that no later test's server, given the port of a silent one here, starts out ejected."""
    yield
    runtime.shutdown()


@pytest.fixture
async def live() -> AsyncIterator[RunningServer]:
    server = await start_server("vllm", scorer=encoding_scorer)
    yield server
    await server.close()


@pytest.fixture
async def silent() -> AsyncIterator[list[RunningServer]]:
    """49 servers that take every connection and never answer."""
    servers = [await start_server("vllm") for _ in range(49)]
    for server in servers:
        server.set_fault(Hang())
    yield servers
    for server in servers:
        await server.close()


def config_for(*urls: str, **settings: Any) -> RerankerConfig:
    return RerankerConfig(endpoint=", ".join(urls), api="rerank",
                          **{"timeout": 5.0, "breaker_cooldown": NO_PROBE_S, **settings})


def ejected(urls: Sequence[str]) -> bool:
    breakers = runtime.statistics().breakers
    return all(breakers.get(url) == "open" for url in urls)


async def reranked(config: RerankerConfig, q: int, *, check: bool = True) -> None:
    result = await runtime.rerank_result_async(*recall(q, 4), config=config)
    assert result.ranking is not None or not check, f"{result.reason}: {result.message}"


async def recall_rounds(configs: Sequence[RerankerConfig], rounds: int, first_query: int = 0, *,
                        check: bool = True) -> None:
    """Rounds of one recall per config at once, each round waiting until the detections it started have
    ended (at their deadline at the latest), each outcome heard by its breaker. ``check``: each recall
    must be reranked (rounds that first detect dozens of replica-key pairs at once may, on a busy
    machine, not know a live route before a short deadline; those are not what a test is about)."""
    for round_ in range(rounds):
        query = first_query + 100 * round_
        await asyncio.gather(*(reranked(config, query + n, check=check) for n, config in enumerate(configs)))
        await footprint_until(lambda f: f["detecting"] == 0)


async def test_fifty_replicas_with_forty_nine_refusing_cost_a_recall_what_one_live_replica_does(
        live: RunningServer) -> None:
    dead = [closed_port_url() for _ in range(49)]
    many, alone = config_for(live.url, *dead), config_for(live.url)
    await recall_rounds([many], rounds=3, check=False)  # three failed detections in a row eject a dead replica
    assert ejected(dead), runtime.statistics().breakers
    listed = {r.url: r.breaker for r in runtime.statistics().replicas}
    assert {url: listed.get(url) for url in dead} == dict.fromkeys(dead, "open")
    assert listed.get(live.url) == "closed"

    detections = runtime.statistics().detections
    alone_s: list[float] = []
    many_s: list[float] = []
    for q in range(40):  # side by side
        for config, times in ((alone, alone_s), (many, many_s)):
            before = await owner_cpu_s()
            await reranked(config, q)
            times.append(await owner_cpu_s() - before)
    stats = runtime.statistics()
    assert stats.detections == detections  # the live route is known, every dead replica ejected
    assert ejected(dead)
    # a sanity bound, in the owner thread's CPU time, which the machine's other load does not stretch (its wall
    # time, at a millisecond a recall, did: 2.1x once with the suite and two spinners on two cores; 1.1-1.3x idle)
    assert statistics.median(many_s) < 2 * statistics.median(alone_s), (many_s, alone_s)


async def owner_cpu_s() -> float:
    """The CPU time the owner loop's thread has used: where the engine's work on a recall is done."""
    return float(await owner_call(lambda _: time.thread_time()))


async def test_forty_nine_silent_replicas_get_no_request_once_ejected(
        live: RunningServer, silent: list[RunningServer]) -> None:
    many = config_for(live.url, *(s.url for s in silent), timeout=1.0)
    await recall_rounds([many], rounds=3, check=False)  # the rounds that eject them
    assert ejected([s.url for s in silent]), runtime.statistics().breakers
    sent = [s.count() for s in silent]
    detections = runtime.statistics().detections
    steady = many.replace(timeout=5.0)  # the same servers, keys and breakers; 1 s was for the ejection rounds
    for q in range(40):  # a request to a silent replica would reach it (and be counted) at any deadline
        await reranked(steady, 1000 + q)
    assert [s.count() for s in silent] == sent
    assert runtime.statistics().detections == detections
    assert len({r.url for r in runtime.statistics().replicas} & {live.url, *(s.url for s in silent)}) == 50


async def test_an_ejected_replica_gets_its_probe_each_cooldown_and_nothing_else(
        live: RunningServer, silent: list[RunningServer]) -> None:
    """After the cooldown one recall probes every silent replica once (a detection, its breaker's probe)
    and is reranked without waiting for them; the probes fail, and the replicas are ejected again."""
    clock = ManualClock()
    runtime.restart(clock=clock)
    many = config_for(live.url, *(s.url for s in silent), timeout=1.0, breaker_cooldown=15)
    urls = [s.url for s in silent]
    await recall_rounds([many], rounds=3, check=False)  # the rounds that eject them
    assert ejected(urls), runtime.statistics().breakers
    sent, detections = [s.count() for s in silent], runtime.statistics().detections
    clock.now += 15
    # Reranked: the probes do not hold it up (one that waited for them would wait to its deadline, so a
    # deadline that a busy machine cannot miss by chance keeps the test about that, not about speed).
    probing = many.replace(timeout=5.0)  # its detections end by then, well within the round's 10 s wait
    await recall_rounds([probing], rounds=1, first_query=1000)
    assert all(s.count() > n for s, n in zip(silent, sent, strict=True))  # each one probed
    assert runtime.statistics().detections - detections == len(silent)  # once
    assert ejected(urls)
    sent = [s.count() for s in silent]
    await recall_rounds([many], rounds=5, first_query=2000)
    assert [s.count() for s in silent] == sent


async def test_eleven_profiles_with_their_own_keys_keep_a_silent_replica_ejected() -> None:
    """33 pairs of replica and key: each key's breaker hears the silent replica's failures, and keeps them."""
    servers = [await start_server("vllm", scorer=encoding_scorer) for _ in range(3)]
    dead = servers[2]
    dead.set_fault(Hang())
    try:
        profiles = [config_for(*(s.url for s in servers), timeout=1.0, api_key=f"profile-{n}") for n in range(11)]
        await recall_rounds(profiles, rounds=3, check=False)  # three detections per key, each failing at its deadline
        sent, detections = dead.count(), runtime.statistics().detections
        await recall_rounds(profiles, rounds=10, first_query=1000)
        assert dead.count() == sent
        assert runtime.statistics().detections == detections
        assert ejected([dead.url])
    finally:
        for server in servers:
            await server.close()


async def test_a_key_the_server_refuses_does_not_eject_it_for_another_key(live: RunningServer) -> None:
    """A 401 says the key is wrong, not that the server is down: health is kept per server and key."""
    live.set_fault(lambda r: Respond(401, {"error": "bad key"}) if r.headers.get("Authorization") == "Bearer bad"
                   else None)
    bad, good = config_for(live.url, api_key="bad"), config_for(live.url, api_key="good")
    for q in range(5):
        assert await runtime.rerank_async(*recall(q, 4), config=bad) is None
    assert runtime.statistics().breakers[live.url] == "open"  # the bad key's breaker (the worst is shown)
    for q in range(5):
        await reranked(good, q)


async def test_a_key_fixed_since_does_not_leave_its_server_shown_ejected(live: RunningServer) -> None:
    """The status of the settings viewed shows their key's breaker. A mistyped key's breaker stays open for good once
    the key is fixed (nothing is sent with it again): shown as the server's, it said "ejected", then "probing back",
    beside recalls that were all reranked. Viewed without a key, a server still shows its keys' worst breaker."""
    live.set_fault(lambda r: Respond(401, {"error": "bad key"}) if r.headers.get("Authorization") == "Bearer typo"
                   else None)
    typo, fixed = config_for(live.url, api_key="typo"), config_for(live.url, api_key="fixed")
    for q in range(5):
        assert await runtime.rerank_async(*recall(q, 4), config=typo) is None
    assert runtime.statistics(typo.endpoints, typo.key_fingerprint).breakers == {live.url: "open"}  # as seen then
    for q in range(5):
        await reranked(fixed, q)
    shown = runtime.statistics(fixed.endpoints, fixed.key_fingerprint)
    assert shown.breakers == {live.url: "closed"} and [row.breaker for row in shown.replicas] == ["closed"]
    assert runtime.statistics(fixed.endpoints).breakers == {live.url: "open"}  # no key viewed: the worst
