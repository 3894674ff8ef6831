"""A detected route is checked again after ``DETECTION_TTL_S`` without a recall ever waiting for it: the
expired route keeps serving while one background detection runs (stale-while-revalidate). The same route
found again keeps its batcher (hedge-delay window, retry budget); a changed one replaces it; a failed
check keeps the working route and leaves the breaker alone; closing the service stops a check under way.

The route's age is read from the service's injected clock, so ten minutes pass when the test says so; the
servers are the real protocol servers, and their gates hold the check's GETs while recalls go through.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from support.deadlines import ManualClock
from support.encoding import encoding_scorer, recall
from support.loop_steps import until
from support.servers import Respond, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.deadline import deadline_in
from usr.plugins.a0_reranker.core.detection import IDENTIFYING_GETS, PROBE_QUERY
from usr.plugins.a0_reranker.core.statistics import StatsRecorder
from usr.plugins.a0_reranker.service.reranker_service import RerankService
from usr.plugins.a0_reranker.service.route_checks import DETECTION_TTL_S

pytestmark = pytest.mark.anyio


def gets(server: RunningServer) -> int:
    return sum(r.method == "GET" for r in server.requests)


def posts(server: RunningServer) -> int:
    return sum(r.method == "POST" for r in server.requests)


async def reranked(service: RerankService, config: RerankerConfig, q: int, n: int = 4) -> bool:
    return (await service.rerank(*recall(q, n), config, deadline_in(config.timeout))).ranking is not None


async def test_an_expired_route_serves_at_once_while_one_check_runs_and_its_batcher_stays(
        vllm_server: RunningServer) -> None:
    """Past the TTL, recalls are answered while the check's GETs are held at the server: one check (one set
    of identifying GETs), the same batcher before and after, and no further check until the TTL passes again."""
    clock, stats = ManualClock(), StatsRecorder()
    service = RerankService(stats, clock=clock)
    config = RerankerConfig(endpoint=vllm_server.url, timeout=30.0)
    try:
        assert await reranked(service, config, 0)
        one_detection = gets(vllm_server)
        assert one_detection == len(IDENTIFYING_GETS) and stats.snapshot().detections == 1
        batchers = list(service._registry._groups.values())
        clock.now += DETECTION_TTL_S + 1
        vllm_server.gate.hold(lambda request: request.method == "GET")
        for q in (1, 2, 3):  # each answered with the check's GETs held: none waits for it
            assert await reranked(service, config, q)
        await vllm_server.gate.wait_held(len(IDENTIFYING_GETS))
        assert service.footprint()["detecting"] == 1 and gets(vllm_server) == 2 * one_detection
        vllm_server.gate.release()
        await until(lambda: service.footprint()["detecting"] == 0)  # its probe POST answered, the check done
        assert stats.snapshot().detections == 2
        assert await reranked(service, config, 4)
        assert gets(vllm_server) == 2 * one_detection  # checked again only after another TTL
        assert list(service._registry._groups.values()) == batchers  # same route: same batcher, same state
        assert all(a is b for a, b in zip(service._registry._groups.values(), batchers, strict=True))
    finally:
        vllm_server.gate.release()
        await service.close()


@contextlib.asynccontextmanager
async def detected(kind: str) -> AsyncIterator[tuple[RunningServer, ManualClock, RerankService, RerankerConfig]]:
    """A ``kind`` server that takes 32 texts a request, and a service on its own clock that detected it."""
    server = await start_server(kind, scorer=encoding_scorer, max_client_batch_size=32)
    clock = ManualClock()
    service = RerankService(StatsRecorder(), clock=clock)
    config = RerankerConfig(endpoint=server.url, timeout=30.0)
    try:
        assert await reranked(service, config, 0)
        yield server, clock, service, config
    finally:
        await service.close()
        await server.close()


async def checked_again(service: RerankService, config: RerankerConfig, clock: ManualClock, q: int) -> None:
    """Past the TTL: a recall served by the known route starts the check, which then ends."""
    clock.now += DETECTION_TTL_S + 1
    assert await reranked(service, config, q)
    await until(lambda: service.footprint()["detecting"] == 0)


async def test_a_route_changed_on_the_server_is_picked_up_by_the_check() -> None:
    """TEI restarted with a smaller --max-client-batch-size: the old route keeps serving small recalls, the
    check reads the new limit, and the next larger recall is split to it at once (no 422, no detection)."""
    async with detected("tei") as (server, clock, service, config):
        server.protocol.max_client_batch_size = 4  # type: ignore[attr-defined]
        await checked_again(service, config, clock, 1)
        sent, detected_by = posts(server), gets(server)
        assert await reranked(service, config, 2, n=6)
        assert (posts(server) - sent, gets(server) - detected_by) == (2, 0)  # 4 + 2 pairs, on the route checked


@pytest.mark.parametrize(("kind", "limit_after_check", "posts_after_check"), [("infinity", 4, 2), ("tei", 8, 1)])
async def test_a_limit_the_server_named_in_a_refusal_outlives_the_check_unless_detection_reads_another(
        kind: str, limit_after_check: int, posts_after_check: int) -> None:
    """A 422 naming the most texts a request (Infinity's ``/models`` does not say it) caps the route; the check
    finds the route detection gives, with the limit that was refused, and keeps the cap. TEI's ``/info`` says its
    limit: one read by the check (the server restarted with 8) replaces the cap."""
    async with detected(kind) as (server, clock, service, config):
        server.protocol.max_client_batch_size = 4  # type: ignore[attr-defined]
        sent = posts(server)
        assert await reranked(service, config, 1, n=6)
        assert posts(server) - sent == 3  # refused once, then 4 + 2
        server.protocol.max_client_batch_size = limit_after_check  # type: ignore[attr-defined]
        await checked_again(service, config, clock, 2)  # the capped route serves meanwhile
        sent = posts(server)
        assert await reranked(service, config, 3, n=6)
        assert posts(server) - sent == posts_after_check


async def test_a_failed_check_keeps_the_working_route_and_leaves_the_breaker_closed(
        vllm_server: RunningServer) -> None:
    """The server refuses the check's GETs and probe (one failure would open this breaker) while it answers
    recalls: the route and its batcher stay, the breaker stays closed, and the next check waits a TTL."""
    clock, stats = ManualClock(), StatsRecorder()
    service = RerankService(stats, clock=clock)
    config = RerankerConfig(endpoint=vllm_server.url, timeout=30.0, breaker_failures=1)
    try:
        assert await reranked(service, config, 0)
        batchers = list(service._registry._groups.values())
        clock.now += DETECTION_TTL_S + 1
        vllm_server.set_fault(lambda r: Respond(503, "busy") if r.method == "GET" or PROBE_QUERY in r.text else None)
        assert await reranked(service, config, 1)
        await until(lambda: service.footprint()["detecting"] == 0)
        checked = gets(vllm_server)
        assert checked == 2 * len(IDENTIFYING_GETS)
        for q in (2, 3):
            assert await reranked(service, config, q)
        assert gets(vllm_server) == checked
        assert service.live_state()["breakers"] == {vllm_server.url: "closed"}
        assert all(a is b for a, b in zip(service._registry._groups.values(), batchers, strict=True))
        assert len(service._registry._groups) == len(batchers)
    finally:
        vllm_server.set_fault(None)
        await service.close()


async def test_closing_the_service_stops_a_check_under_way(vllm_server: RunningServer) -> None:
    """A check held at the server when the service closes is stopped with it: nothing left running."""
    clock = ManualClock()
    service = RerankService(StatsRecorder(), clock=clock)
    config = RerankerConfig(endpoint=vllm_server.url, timeout=30.0)
    try:
        assert await reranked(service, config, 0)
        clock.now += DETECTION_TTL_S + 1
        vllm_server.gate.hold(lambda request: request.method == "GET")
        assert await reranked(service, config, 1)
        await vllm_server.gate.wait_held(len(IDENTIFYING_GETS))
        assert service.footprint()["detecting"] == 1
        await service.close()
        assert service.footprint()["detecting"] == 0
        assert service._transport._sessions == {}
    finally:
        vllm_server.gate.release()
        await service.close()
