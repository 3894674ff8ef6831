"""The warm path: a recall with the settings of the last one rebuilds and reconfigures nothing, and a
recall with changed settings gets them at once.

A group's batcher is keyed by the settings it is built from and by the routes and endpoint states it
is bound to; a change of one of them makes another group (configuration by replacement), and the
old one drains and is forgotten when idle.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from support.counters import owner_call, stats_until
from support.encoding import recall
from support.servers import RunningServer
from usr.plugins.a0_reranker.batching.breaker import CircuitBreaker
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.deadline import deadline_in
from usr.plugins.a0_reranker.core.errors import DeadlineExceeded, RerankError
from usr.plugins.a0_reranker.core.statistics import StatsRecorder
from usr.plugins.a0_reranker.service import reranker_service as endpoints_module
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.endpoints import EndpointRegistry, HttpTransport, Members, breaker_policy
from usr.plugins.a0_reranker.service.reranker_service import RouteBook

pytestmark = pytest.mark.anyio


def posts(server: RunningServer) -> int:
    return sum(r.method == "POST" for r in server.requests)


async def test_a_changed_setting_reaches_the_next_recall_and_the_old_one_comes_back(
        vllm_server: RunningServer) -> None:
    """Requests of at most 64, then 2, then 64 pairs again: 1, then 3, then 1 request for 6 memories."""
    wide = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=30.0, max_pairs_per_request=64)
    narrow = wide.replace(max_pairs_per_request=2)
    sent = []
    for config in (wide, wide, narrow, wide):
        before = posts(vllm_server)
        assert await runtime.rerank_async(*recall(len(sent), 6), config=config) is not None
        sent.append(posts(vllm_server) - before)
    assert sent == [1, 1, 3, 1]


async def test_known_routes_come_back_without_a_task_or_a_wait(vllm_server: RunningServer) -> None:
    """Once detected, a recall's routes are read at once: no task, no turn of the loop (the recalls of a
    burst then reach the queue together, before its first request is formed)."""
    config = RerankerConfig(endpoint=vllm_server.url, timeout=10.0)
    transport, registry = HttpTransport(), EndpointRegistry(StatsRecorder())
    book = RouteBook(transport)
    endpoints = [registry.endpoint(config, vllm_server.url)]
    detected = await book.routes(config, deadline_in(10.0), endpoints)  # the first call detects
    assert book.cached == 1 and book.running == 0
    tasks = len(asyncio.all_tasks())
    warm = book.routes(config, deadline_in(10.0), endpoints)
    with pytest.raises(StopIteration) as finished:  # ran to its end in one step: it never suspended
        warm.send(None)
    assert finished.value.value == detected and len(asyncio.all_tasks()) == tasks
    book.forget(config)  # forgotten: the next call detects again, and waits for it
    again = asyncio.ensure_future(book.routes(config, deadline_in(10.0), endpoints))
    await asyncio.sleep(0)
    assert book.running == 1 and not again.done()
    assert [r.dialect for r in (await again).values()] == [r.dialect for r in detected.values()]
    assert book.running == 0
    await book.close()
    await registry.close()
    await transport.close()


async def test_a_detection_forgotten_while_running_leaves_only_its_successor_running(
        vllm_server: RunningServer) -> None:
    """A route forgotten mid-detection (a breaker opened) leaves that detection to run to its deadline; a
    call right after starts another. The first one's end must not clear the second's mark: while the
    second runs a call waits for it (it is not taken for a known route), and nothing stays marked after."""
    config = RerankerConfig(endpoint=vllm_server.url, timeout=10.0)
    transport, registry = HttpTransport(), EndpointRegistry(StatsRecorder())
    book = RouteBook(transport)
    endpoints = [registry.endpoint(config, vllm_server.url)]
    vllm_server.gate.hold()
    first = asyncio.ensure_future(book.routes(config, deadline_in(1.0), endpoints))
    await vllm_server.gate.wait_held(1)
    book.forget(config)  # the cache forgets it; the detection itself runs on
    second = asyncio.ensure_future(book.routes(config, deadline_in(60.0), endpoints))
    await vllm_server.gate.wait_held(2)  # the second detection's first request, beside the first's
    with pytest.raises(RerankError):
        await first  # the first detection ends at its deadline, held at the server all along
    assert book.running == 1 and not second.done()
    waiting = asyncio.ensure_future(book.routes(config, deadline_in(60.0), endpoints))
    await asyncio.sleep(0)
    assert not waiting.done()  # the running detection is waited for, not read as known
    vllm_server.gate.release()
    assert (await second).keys() == (await waiting).keys() == {vllm_server.url}
    assert book.running == 0 and book.cached == 1
    await book.close()
    await registry.close()
    await transport.close()


async def test_a_forgotten_detection_ending_as_its_successor_starts_leaves_no_unfinished_route_taken_as_known(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The forgotten detection ends in the very turn after a call started the next one, before that one's
    first step: the next one must already be marked running, so a recall arriving then waits for it only
    up to its own deadline instead of awaiting it as a known route. Detection itself is held by events
    here, to put the two ends in the same turn; the route book is real."""
    ends: list[asyncio.Event] = []
    begun = asyncio.Event()

    async def held_detection(transport: object, config: RerankerConfig, deadline: float) -> object:
        ends.append(asyncio.Event())
        begun.set()
        await ends[-1].wait()
        return endpoints_module.Route(config.endpoint, None, "m")  # type: ignore[arg-type]

    monkeypatch.setattr(endpoints_module, "resolve_route", held_detection)
    config = RerankerConfig(endpoint="http://127.0.0.1:9", timeout=10.0)
    registry, book = EndpointRegistry(StatsRecorder()), RouteBook(HttpTransport())
    endpoints = [registry.endpoint(config, "http://127.0.0.1:9")]
    first = asyncio.ensure_future(book.routes(config, deadline_in(60.0), endpoints))
    await begun.wait()
    book.forget(config)  # a breaker opened: the cache forgets the route, its detection runs on
    second = asyncio.ensure_future(book.routes(config, deadline_in(60.0), endpoints))
    ends[0].set()  # the forgotten one ends in the next turn, the one in which the second call starts its own
    await asyncio.sleep(0)
    assert book.running == 1  # the second detection, not yet begun, already counts as running
    with pytest.raises(DeadlineExceeded):  # waited for up to its own deadline, not to the detection's end
        await asyncio.wait_for(book.routes(config, deadline_in(0.2), endpoints), 30.0)
    await first
    assert not second.done() and book.running == 1
    ends[-1].set()
    assert (await second).keys() == {"http://127.0.0.1:9"}
    assert book.running == 0 and book.cached == 1
    await book.close()
    await registry.close()


async def test_callers_joining_a_detection_in_one_burst_each_leave_at_their_own_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In a burst, the first call starts the detection and it runs to that call's deadline; the callers
    joining it in the same turn, before it has begun, must read that deadline, not one another's, or a
    caller whose deadline comes before the first's waits for the detection's end (found in review:
    each joining call overwrote the mark with its own deadline)."""
    release = asyncio.Event()

    async def held_detection(transport: object, config: RerankerConfig, deadline: float) -> object:
        await release.wait()
        return endpoints_module.Route(config.endpoint, None, "m")  # type: ignore[arg-type]

    monkeypatch.setattr(endpoints_module, "resolve_route", held_detection)
    config = RerankerConfig(endpoint="http://127.0.0.1:9", timeout=10.0)
    registry, book = EndpointRegistry(StatsRecorder()), RouteBook(HttpTransport())
    endpoints = [registry.endpoint(config, "http://127.0.0.1:9")]
    first = asyncio.ensure_future(book.routes(config, deadline_in(60.0), endpoints))
    early = [asyncio.ensure_future(book.routes(config, deadline_in(s), endpoints)) for s in (0.2, 0.3)]
    for caller in early:  # the 0.3 s caller read the 0.2 s caller's mark: it had no timeout of its own
        with pytest.raises(DeadlineExceeded):
            await asyncio.wait_for(caller, 10.0)
    assert not first.done() and book.running == 1
    release.set()
    assert (await first).keys() == {"http://127.0.0.1:9"}
    assert book.running == 0 and book.cached == 1
    await book.close()
    await registry.close()


def state() -> EndpointState:
    config = RerankerConfig()
    return EndpointState(EndpointLimiter(2), CircuitBreaker(breaker_policy(config)))


async def test_a_group_is_built_again_only_when_what_it_is_bound_to_changes() -> None:
    registry = EndpointRegistry(StatsRecorder())
    built: list[tuple[RerankerConfig, bool, object, EndpointState]] = []
    config, route, first = RerankerConfig(endpoint="http://h:1"), object(), state()

    def group(config: RerankerConfig, to_probability: bool, route: object, state: EndpointState) -> object:
        def members() -> Members:
            built.append((config, to_probability, route, state))
            return (), True, 8
        return registry.group(config, to_probability, [("http://h:1", route, state)], members)

    batcher = group(config, False, route, first)
    for unrelated in ({}, {"timeout": 3.0}, {"min_score": 0.5}, {"candidates": 7}):  # what each call brings
        assert group(config.replace(**unrelated), False, route, first) is batcher
    assert len(built) == 1
    changes = [(config.replace(max_retries=0), False, route, first),
               (config.replace(max_retries=0), True, route, first),
               (config.replace(max_retries=0), True, object(), first),
               (config.replace(max_retries=0), True, route, state())]
    batchers = [group(*change) for change in changes]
    assert len({id(b) for b in [batcher, *batchers]}) == 5  # each change: a batcher of its own
    assert [entry[1:] for entry in built[1:]] == [change[1:] for change in changes]
    assert group(config, False, route, first) is batcher  # the first settings again: its batcher again
    await registry.close()


def test_changed_slot_or_breaker_settings_get_new_endpoint_state_and_the_old_keeps_its_own() -> None:
    registry = EndpointRegistry(StatsRecorder())
    config = RerankerConfig(endpoint="http://h:1", max_concurrency=2)
    old = registry.endpoint(config, "http://h:1")
    assert registry.endpoint(config.replace(timeout=3.0), "http://h:1") is old
    wider = registry.endpoint(config.replace(max_concurrency=5), "http://h:1")
    stricter = registry.endpoint(config.replace(breaker_failures=1), "http://h:1")
    assert len({id(old), id(wider), id(stricter)}) == 3
    assert (old.state.limiter.capacity, wider.state.limiter.capacity) == (2, 5)
    assert (old.state.breaker.policy.consecutive, stricter.state.breaker.policy.consecutive) == (3, 1)
    assert registry.endpoint(config, "http://h:1") is old


def test_status_shows_the_breaker_of_the_settings_last_used_for_each_key() -> None:
    registry = EndpointRegistry(StatsRecorder())
    config = RerankerConfig(endpoint="http://h:1", breaker_failures=1)
    old = registry.endpoint(config, "http://h:1")
    changed = registry.endpoint(config.replace(max_concurrency=3), "http://h:1")  # settings changed: a breaker of its own
    changed.state.breaker.attempt().report("down")
    assert registry.live_state()["breakers"] == {"http://h:1": "open"}
    assert registry.endpoint(config, "http://h:1") is old  # the old settings again: their breaker is closed
    assert registry.live_state()["breakers"] == {"http://h:1": "closed"}
    other_key = registry.endpoint(config.replace(api_key="k2"), "http://h:1")
    other_key.state.breaker.attempt().report("down")  # another key's view of the server: the worst shows
    assert registry.live_state()["breakers"] == {"http://h:1": "open"}


async def test_settings_changed_mid_request_leave_nothing_held_once_both_are_done_or_cancelled(
        vllm_server: RunningServer) -> None:
    """A request under the old settings drains on its own slot while the new settings get new state; one
    caller leaves (cancelled) while held: afterwards no slot is held, nothing queued, every batcher idle."""
    old = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=30.0, max_concurrency=2)
    new = old.replace(max_concurrency=3, max_pairs_per_request=64)
    assert await runtime.rerank_async(*recall(0, 4), config=old) is not None  # the route is known
    vllm_server.gate.hold(lambda request: request.method == "POST")
    draining = asyncio.create_task(runtime.rerank_async(*recall(1, 4), config=old))
    leaving = asyncio.create_task(runtime.rerank_async(*recall(2, 4), config=new))
    await vllm_server.gate.wait_held(2)
    in_flight = await owner_call(lambda service: {e.state.limiter.capacity: e.state.limiter.in_flight
                                                  for e in service._registry._endpoints.values()})
    assert (in_flight[2], in_flight[3]) == (1, 1)  # each settings' own state holds its own slot
    leaving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await leaving
    vllm_server.gate.release()
    assert await draining is not None
    await stats_until(lambda stats: stats.in_flight == 0 and stats.queued_pairs == 0)
    assert await owner_call(lambda service: all(b.idle for b in service._registry._groups.values()))
