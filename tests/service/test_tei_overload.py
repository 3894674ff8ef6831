"""TEI out of concurrency permits (``--max-concurrent-requests``: each text of a rerank holds one through its
inference; a rerank a text of which finds none free is 429 ``{"error": "Model is overloaded", "error_type":
"Overloaded"}``): its 429 clears as soon as a request ends, so the endpoint is held back only until our next
answer from it, or a short growing hold (0.1 s, doubling) while none of ours is there. A hosted API's quota 429
keeps the long hold (0.5 s and more). A 429 never opens the breaker.

Through the public API against the TEI stand-in on loopback, sequenced by its permit counters and its inference
gate (``support.servers.tei_permits``): texts holding permits wait at that gate until the test releases it. The
recalls that must be reranked get a patient timeout, so a busy machine cannot make them race the clock; when the
retry goes out (at our answer, well before the long hold's 0.5 s) is told apart in virtual time, in
``tests/unit/test_overloaded_429.py``. The quota 429 below has 0.45 s, less than the long hold's least: held back,
it falls back at once, with nothing more sent, an outcome the clock cannot change.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from support.counters import accounted, stats_until
from support.deadlines import PATIENT_S
from support.encoding import encoding_scorer, number, recall
from support.servers import RecordedRequest, Respond, RunningServer, start_server
from support.servers.tei import TeiApp
from usr.plugins.a0_reranker.batching import retries
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

TEXTS = 4  # memories a recall, so texts (and permits) a request
WARM_UPS = 25  # answered recalls first: detection, the pace, and the retry budget's share (a fifth of requests)


async def tei(permits: int) -> tuple[RunningServer, TeiApp, RerankerConfig]:
    server = await start_server("tei", scorer=encoding_scorer, max_concurrent_requests=permits)
    app = server.protocol
    assert isinstance(app, TeiApp)
    config = RerankerConfig(endpoint=server.url, timeout=PATIENT_S)
    for q in range(WARM_UPS):
        assert await runtime.rerank_async(*recall(q, TEXTS), config=config) is not None
    return server, app, config


def sent_for(server: RunningServer, agent: int) -> list[RecordedRequest]:
    """The rerank requests of agent ``agent``'s recall, in the order they arrived."""
    return [r for r in server.requests
            if r.path == "/rerank" and isinstance(r.json, dict) and number(r.json.get("query", "")) == agent]


def start(agent: int, config: RerankerConfig) -> asyncio.Task[Any]:
    return asyncio.create_task(runtime.rerank_async(*recall(agent, TEXTS), config=config))


async def test_an_overloaded_429_goes_again_once_our_request_in_flight_is_answered() -> None:
    """Recall 100 holds every permit; recall 101 is refused, goes again once 100 is answered, and is reranked: an
    overloaded 429 neither loses the recall nor opens the breaker."""
    server, app, config = await tei(permits=TEXTS)
    try:
        app.permits.inference.hold()
        first = start(100, config)
        await app.permits.wait_until_taken(TEXTS)
        second = start(101, config)
        await app.permits.wait_until_overloaded(1)
        app.permits.inference.release()
        assert await first is not None and await second is not None
        assert len(sent_for(server, 101)) >= 2  # refused, then sent again (and answered)
        stats = await stats_until(accounted)
        assert stats.fallbacks == {} and stats.breakers[server.url] == "closed", stats
    finally:
        await server.close()


async def test_offered_load_above_the_permits_is_served_with_every_recall_reranked() -> None:
    """Four recalls at once at a server with permits for two requests' texts: two are refused; the server stays
    full past their first short hold, so they are refused again; once it answers ours, both go again and are
    reranked. No retry is allowed: a refusal at the door spends none, however often it comes."""
    server, app, config = await tei(permits=2 * TEXTS)
    try:
        app.permits.inference.hold()
        patient = config.replace(max_retries=0)
        calls = [start(200 + k, patient) for k in range(4)]
        await app.permits.wait_until_overloaded(4, within_s=5.0)  # two refused, each twice
        assert app.permits.taken == 2 * TEXTS
        app.permits.inference.release()
        results = await asyncio.gather(*calls)
        assert all(result is not None for result in results)
        stats = await stats_until(accounted)
        assert stats.fallbacks == {} and stats.breakers[server.url] == "closed", stats
        assert stats.reranked == WARM_UPS + 4
    finally:
        await server.close()


async def test_a_quota_429_keeps_the_long_hold_while_our_request_in_flight_is_answered() -> None:
    """The same scene, but recall 301 is refused with a plain 429 (a gateway's or a hosted API's quota): held
    back half a second or more, it falls back at once with its 0.45 s, and nothing more of it is sent."""
    server, app, config = await tei(permits=512)
    try:
        server.set_fault(lambda r: Respond(429, "Too Many Requests") if "#301" in r.text else None)
        app.permits.inference.hold()
        first = start(300, config)
        await app.permits.wait_until_taken(TEXTS)
        assert await runtime.rerank_async(*recall(301, TEXTS), config=config.replace(timeout=0.45)) is None
        app.permits.inference.release()
        assert await first is not None
        assert len(sent_for(server, 301)) == 1
        stats = await stats_until(accounted)
        assert stats.fallbacks == {"rate_limited": 1} and stats.breakers[server.url] == "closed", stats
    finally:
        await server.close()


async def test_many_agents_above_the_permits_take_turns_with_every_recall_reranked() -> None:
    """24 agents, 5 recalls each of 20 memories, at a TEI whose permits hold the texts of two of our four requests
    (each request's texts 20 ms in the model, the stand-in's inference): the refused go again at our answers, and
    every recall is reranked. Before, 39% of such recalls fell back once their two retries were spent."""
    server, app, config = await tei(permits=2 * 20)

    async def inference(request: RecordedRequest) -> None:
        await asyncio.sleep(0.02)  # the model's time, which keeps the permits taken: no synchronisation waits on it

    app.permits.inference.passage = inference  # type: ignore[method-assign]
    try:
        async def agent(a: int) -> list[object]:
            return [await runtime.rerank_async(*recall(1000 + 10 * a + k, 20), config=config) for k in range(5)]

        results = [r for rs in await asyncio.gather(*(agent(a) for a in range(24))) for r in rs]
        assert all(result is not None for result in results)
        assert app.permits.overloaded > 0  # they did take turns: some were refused
        stats = await stats_until(accounted)
        assert stats.fallbacks == {} and stats.breakers[server.url] == "closed", stats
    finally:
        await server.close()


async def test_a_detection_refused_for_full_permits_holds_only_until_our_next_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Recall 400 holds every permit when recalls of another model setting (so another detection) begin: that
    detection's probe is refused 429 Overloaded, and its recall falls back. It is the server's capacity, not a
    quota: once 400 is answered, the next recall of those settings detects and is reranked. The quota's hold is
    made a minute here, so a detection 429 taken for one could only leave that recall to fall back."""
    monkeypatch.setattr(retries, "RATE_LIMIT_BASE_S", 60.0)
    monkeypatch.setattr(retries, "RATE_LIMIT_CAP_S", 60.0)
    server, app, config = await tei(permits=TEXTS)
    other = config.replace(model=app.model)  # the model is part of what a detection is kept by
    try:
        app.permits.inference.hold()
        first = start(400, config)
        await app.permits.wait_until_taken(TEXTS)
        assert await runtime.rerank_async(*recall(401, TEXTS), config=other) is None
        assert app.permits.overloaded == 1  # the detection's probe, refused
        app.permits.inference.release()
        assert await first is not None
        assert await runtime.rerank_async(*recall(402, TEXTS), config=other) is not None
        stats = await stats_until(accounted)
        assert stats.fallbacks == {"rate_limited": 1} and stats.breakers[server.url] == "closed", stats
    finally:
        await server.close()
