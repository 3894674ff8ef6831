"""The fault matrix: every dialect's server, every kind of failure (issue 7).

For each fault the public ``rerank()`` (blocking, from a worker thread) and a recall through
``rerank_pool`` run side by side, as A0's threads and loops would. Each must give the stock answer
(None; exactly the stock top-``limit`` objects in stock order) within ``rerank_timeout``, raise
nothing, and the counters must name the reason, once per call; the fault must have met our request.

The counters and the server's record are the proof; time is only a sanity bound (``support.deadlines``:
a timeout never before the deadline, every fallback before the next multiple of the timeout, at least a
second on). The acceptance figure, within ``rerank_timeout`` + 100 ms, is measured by
``bench/deadline_release.py`` as percentiles of one run. Faults that hold the answer back run at a 0.3 s
timeout; the others at 3 s, so that their retries, not the clock, decide the reason (``kit.timeout_for``).

Faults on the answer are aimed at our rerank requests only and come after detection (the route is
cached), so they hit the rerank path; the cold cases at the end fail detection itself.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import anyio.to_thread
import pytest
import trustme
from reliability.answer_faults import HTML_PAGE, MUTATIONS, SERVER_TROUBLE, DamagedAnswer, trouble_answer
from reliability.kit import (
    DIALECT_KINDS,
    KEYED_KINDS,
    LIMIT,
    QUERY,
    TIMEOUT,
    FakeDocument,
    config_for,
    is_ours,
    make_pool,
    on_our_requests,
    same_objects,
    timeout_for,
)
from reliability.tls_server import tls_server

from support.counters import footprint_until, settled_statistics, stats_until
from support.deadlines import PATIENT_S, Stopwatch, assert_released_at_deadline, assert_released_within
from support.outages import closed_port
from support.servers import (
    Delay,
    Disconnect,
    Fault,
    Hang,
    InvalidJson,
    Redirect,
    Respond,
    RunningServer,
    SizedBody,
    StallBody,
    serve_in_thread,
)
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.scores import RecallOutcome
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.endpoints import MAX_ANSWER_BYTES
from usr.plugins.a0_reranker.service.runtime import rerank_pool

pytestmark = pytest.mark.anyio

SERVER_KEY = "matrix-key-5d1f"


@dataclass
class Calls:
    """What the two public entry points gave for the same recall, and how long each took."""

    pool: list[FakeDocument]
    ranking: Any = "not called"
    ranking_s: float = -1.0
    recall: RecallOutcome[FakeDocument] | None = None
    recall_s: float = -1.0


async def call_both(config: RerankerConfig) -> Calls:
    """The blocking ``rerank()`` in a worker thread and the async recall, started together. Both are
    timed from one start taken before either: when they share a detection, the one that joined it
    later leaves when it fails, at the first one's deadline (on a busy machine the thread may start
    20 ms after the recall or before it), which is no earlier than the timeout after this start."""
    calls = Calls(make_pool())
    texts = [d.page_content for d in calls.pool]
    watch = Stopwatch()

    async def blocking_api() -> None:
        calls.ranking, calls.ranking_s = await anyio.to_thread.run_sync(
            lambda: (reranker.rerank(QUERY, texts, config=config), watch.elapsed))

    async def recall() -> None:
        calls.recall = await rerank_pool(QUERY, calls.pool, limit=LIMIT, config=config)
        calls.recall_s = watch.elapsed

    async with anyio.create_task_group() as group:
        group.start_soon(blocking_api)
        group.start_soon(recall)
    return calls


def assert_stock_fallback(calls: Calls, reason: str, config: RerankerConfig) -> None:
    assert calls.ranking is None
    assert calls.recall is not None and not calls.recall.applied
    assert same_objects(calls.recall.documents, calls.pool[:LIMIT])
    released = assert_released_at_deadline if reason == "timeout" else assert_released_within
    for elapsed in (calls.ranking_s, calls.recall_s):
        released(elapsed, config.timeout)
    stats = settled_statistics()
    assert dict(stats.fallbacks) == {reason: 2}, (stats.fallbacks, stats.last_error)
    assert calls.recall.reason == reason


async def detected(server: RunningServer, **settings: Any) -> RerankerConfig:
    """Settings for ``server``, with detection done and cached by one successful recall."""
    config = config_for(server.kind, server.url, **settings)
    warm = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config.replace(timeout=PATIENT_S))
    assert warm.applied, runtime.statistics().last_error
    runtime.stats_recorder().reset()
    return config


async def after_detection(server: RunningServer, fault: Fault, reason: str, **settings: Any) -> None:
    config = await detected(server, **{"timeout": timeout_for(reason), **settings})
    server.set_fault(on_our_requests(fault))
    assert_stock_fallback(await call_both(config), reason, config)
    assert any(is_ours(r) for r in server.requests[-4:]), "the fault must have met our request"


# --- the answer, damaged -----------------------------------------------------------------------

DAMAGE = {**{name: DamagedAnswer(mutate) for name, mutate in MUTATIONS.items()},
          "truncated_json": DamagedAnswer(cut_in_half=True)}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("kind", DIALECT_KINDS)
async def test_a_damaged_answer_falls_back(serve: Any, kind: str, damage: str) -> None:
    await after_detection(serve(kind), DAMAGE[damage], "malformed")


# --- the connection and the HTTP exchange ------------------------------------------------------

EXCHANGE: dict[str, tuple[Fault, str]] = {
    "no_answer_before_timeout": (Hang(), "timeout"),
    "answer_later_than_timeout": (Delay(TIMEOUT * 10), "timeout"),
    "headers_then_stalled_body": (StallBody(partial=b'{"results": [{"index": 0, '), "timeout"),
    "connection_dropped": (Disconnect(), "connect"),
    "redirect": (Redirect(location="/moved/rerank"), "connect"),
    "huge_answer_declared": (SizedBody(MAX_ANSWER_BYTES + 1), "malformed"),
    "huge_answer_chunked": (SizedBody(MAX_ANSWER_BYTES + 1, chunked=True), "malformed"),
    "cut_off_json": (InvalidJson(), "malformed"),
    "html_page_200": (Respond(200, HTML_PAGE, content_type="text/html"), "malformed"),
    "html_error_page_502": (Respond(502, HTML_PAGE, content_type="text/html"), "http_status"),
    "empty_body_200": (Respond(200, b"", content_type="application/json"), "malformed"),
}


@pytest.mark.parametrize("fault", sorted(EXCHANGE))
@pytest.mark.parametrize("kind", DIALECT_KINDS)
async def test_an_exchange_fault_falls_back(serve: Any, kind: str, fault: str) -> None:
    rule, reason = EXCHANGE[fault]
    await after_detection(serve(kind), rule, reason)


@pytest.mark.parametrize("case", sorted(SERVER_TROUBLE))
@pytest.mark.parametrize("kind", DIALECT_KINDS)
async def test_an_overloaded_or_failing_server_falls_back(serve: Any, kind: str, case: str) -> None:
    reason = "rate_limited" if trouble_answer(kind, case).status == 429 else "http_status"
    await after_detection(serve(kind), trouble_answer(kind, case), reason)


async def captured(server: RunningServer, method: str, path: str, body: bytes, key: str) -> Respond:
    """The server's own answer to a raw request, to replay on our rerank requests."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession() as session, session.request(
            method, server.url + path, data=body if method == "POST" else None, headers=headers) as answer:
        payload = await answer.read()
        content_type = answer.content_type if answer.headers.get("Content-Type") else None
        return Respond(answer.status, payload, content_type=content_type)


@pytest.mark.parametrize("error", ["wrong_key", "invalid_json_body"])
@pytest.mark.parametrize("kind", DIALECT_KINDS)
async def test_each_servers_real_error_answer_falls_back(serve: Any, kind: str, error: str) -> None:
    server = serve(kind, api_key=SERVER_KEY)
    config = await detected(server, api_key=SERVER_KEY, timeout=timeout_for("http_status"))
    ours = next(r for r in reversed(server.requests) if is_ours(r))
    if error == "wrong_key" and kind in KEYED_KINDS:
        answer = await captured(server, "POST", ours.path, ours.text.encode(), "wrong-key")
    elif error == "wrong_key":  # vLLM checks keys under /v1 only
        answer = await captured(server, "GET", "/v1/models", b"", "wrong-key")
    else:
        answer = await captured(server, "POST", ours.path, b'{"query": "unterminated', SERVER_KEY)
    # LiteLLM parses the body inside its handler, and orjson's error carries no status: a 500
    expected = range(500, 600) if (kind, error) == ("litellm", "invalid_json_body") else range(400, 500)
    assert answer.status in expected, answer
    server.set_fault(on_our_requests(answer))
    assert_stock_fallback(await call_both(config), "http_status", config)


@pytest.mark.parametrize("kind", DIALECT_KINDS)
async def test_a_server_gone_after_detection_falls_back(kind: str) -> None:
    stack = ExitStack()
    server = stack.enter_context(serve_in_thread(kind))
    try:
        # four failures in a row are expected here
        config = await detected(server, breaker_failures=10, timeout=timeout_for("connect"))
        server.set_fault(on_our_requests(Disconnect()))  # a connection kept alive is cut ...
        assert_stock_fallback(await call_both(config), "connect", config)
        await anyio.to_thread.run_sync(stack.close)  # ... then nothing listens at the address any more
        runtime.stats_recorder().reset()
        assert_stock_fallback(await call_both(config), "connect", config)
        assert "cannot connect" in runtime.statistics().last_error
    finally:
        await anyio.to_thread.run_sync(stack.close)


# --- cold: detection itself fails ----------------------------------------------------------------


async def cold(config: RerankerConfig, reason: str, words: str) -> None:
    calls = await call_both(config)
    assert_stock_fallback(calls, reason, config)
    assert words in runtime.statistics().last_error


async def test_connection_refused_before_detection() -> None:
    await cold(config_for("tei", f"http://127.0.0.1:{closed_port()}", timeout=timeout_for("connect")), "connect",
               "cannot connect")


async def test_unresolvable_host_before_detection() -> None:
    await cold(config_for("tei", "http://reranker.invalid:8080", timeout=timeout_for("connect")), "connect",
               "cannot resolve")


@pytest.fixture(scope="module")
def untrusted_ca() -> trustme.CA:
    return trustme.CA()


@pytest.mark.parametrize("kind", DIALECT_KINDS)
async def test_an_untrusted_certificate_falls_back(kind: str, untrusted_ca: trustme.CA, tmp_path: Path) -> None:
    with tls_server(kind, untrusted_ca) as server:
        await cold(config_for(kind, server.url, timeout=timeout_for("tls")), "tls", "TLS certificate")
        assert server.requests == []  # the handshake failed: no request was ever read


COLD_FAULTS: dict[str, tuple[Fault, str]] = {
    "silent_server": (Hang(), "timeout"),
    "everything_503": (Respond(503, {"error": "Model is overloaded", "error_type": "Unhealthy"}), "detection"),
    "everything_cut_off_json": (InvalidJson(), "detection"),
    "everything_html": (Respond(200, HTML_PAGE, content_type="text/html"), "detection"),
}


@pytest.mark.parametrize("fault", sorted(COLD_FAULTS))
@pytest.mark.parametrize("kind", ["infinity", "tei", "vllm_qwen3", "cohere"])
async def test_a_fault_during_detection_falls_back(serve: Any, kind: str, fault: str) -> None:
    rule, reason = COLD_FAULTS[fault]
    server = serve(kind)
    server.set_fault(rule)
    await cold(config_for(kind, server.url, timeout=timeout_for(reason)), reason, "")


async def test_a_server_silent_from_the_start_opens_the_breaker(serve: Any) -> None:
    """Nothing is detected yet, so no request ever reaches the batcher: detection's own timeouts must
    count against the breaker, or every recall would pay the whole timeout for as long as it lasts."""
    server = serve("infinity")
    server.set_fault(Hang())
    config = config_for("infinity", server.url, breaker_failures=2)
    for _ in range(2):
        assert (await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)).reason == "timeout"
        # The caller gets its fallback at the deadline; the owner loop ends the detection just after. A recall
        # starting before that joins it and shares its one failure, so the next waits until it has ended.
        await footprint_until(lambda footprint: footprint["detecting"] == 0)
    await stats_until(lambda stats: stats.breakers.get(server.url) == "open")
    seen = len(server.requests)
    pool = make_pool()
    outcome = await rerank_pool(QUERY, pool, limit=LIMIT, config=config)
    assert outcome.reason == "breaker_open" and same_objects(outcome.documents, pool[:LIMIT])
    assert len(server.requests) == seen  # refused at once: nothing was sent, no timeout was waited for
