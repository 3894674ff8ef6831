"""Every kind of failure gives None (the caller keeps its order), never an exception, within
rerank_timeout, and the counters name the reason (issue: core engine, acceptance 4).

The release is proved by events and counters: the fault met our request (the server recorded it) and the
counters name the reason, a timeout for the faults that hold the answer back. Time is only a generous
sanity bound (``support.deadlines``: never before the deadline, before the next multiple of the timeout);
the tight figure (within rerank_timeout + 100 ms) is ``bench/deadline_release.py``'s.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from support.counters import accounted, stats_until
from support.deadlines import Stopwatch, assert_released_at_deadline, assert_released_within
from support.outages import closed_port
from support.servers import Delay, Disconnect, Hang, InvalidJson, Respond, StallBody, lexical_scorer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

TIMEOUT = 1.0
QUERY = "rotate the backup key"
DOCS = ["rotate the backup key monthly", "lunch menu", "backup schedule", "key rotation policy"]


async def timed_rerank(config: RerankerConfig) -> tuple[Any, float]:
    watch = Stopwatch()
    result = await reranker.rerank_async(QUERY, DOCS, config=config)
    return result, watch.elapsed


async def test_refused_connection() -> None:
    config = RerankerConfig(endpoint=f"http://127.0.0.1:{closed_port()}", timeout=TIMEOUT)
    result, elapsed = await timed_rerank(config)
    assert result is None
    assert_released_within(elapsed, TIMEOUT)
    stats = runtime.statistics()
    assert stats.fallback_total == 1 and "connect" in stats.last_error
    report = await runtime.probe_async(config)
    assert not report.ok and "cannot connect" in report.message


def posts_only(fault: Any) -> Any:
    return lambda request: fault if request.method == "POST" else None


ERRORS_AFTER_DETECTION = [
    ("tei", {}, Respond(503, {"error": "Model is overloaded", "error_type": "Unhealthy"}), "http_status"),
    ("tei", {}, Respond(424, {"error": "model is not a re-ranker model", "error_type": "Backend"}), "http_status"),
    ("vllm", {}, Respond(500, {"error": {"message": "boom", "type": "InternalServerError", "param": None,
                                         "code": 500}}), "http_status"),
    ("infinity", {}, Respond(429, {"error": {"message": "model minilm is currently overloaded", "type": None,
                                             "param": None, "code": 429}}), "rate_limited"),
    ("cohere", {}, Respond(498, {"message": "invalid api token"}), "http_status"),
    ("llamacpp", {}, InvalidJson(), "malformed"),
    ("vllm", {}, Respond(200, {"id": "x", "results": [{"index": 0, "relevance_score": 0.5}]}), "malformed"),
    ("vllm", {}, Respond(200, {"id": "x", "results": [{"index": i % 2, "relevance_score": 0.5} for i in range(4)]}),
     "malformed"),
    ("tei", {}, Respond(200, [{"index": i + 1, "score": 0.5} for i in range(4)]), "malformed"),
    ("tei", {}, Respond(200, "<html><body>Proxy error</body></html>", content_type="text/html"), "malformed"),
    ("infinity", {}, Disconnect(), "connect"),
    ("infinity", {}, Hang(), "timeout"),
    ("vllm", {}, StallBody(partial=b'{"results": ['), "timeout"),
    ("vllm", {}, Delay(5.0), "timeout"),
]


@pytest.mark.parametrize(("kind", "options", "fault", "reason"), ERRORS_AFTER_DETECTION,
                         ids=[f"{c[0]}-{type(c[2]).__name__}-{c[3]}-{i}" for i, c in enumerate(ERRORS_AFTER_DETECTION)])
async def test_failures_of_a_detected_server(kind: str, options: dict[str, Any], fault: Any, reason: str) -> None:
    server = await start_server(kind, **options)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=TIMEOUT, model="m" if kind == "cohere" else "")
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None  # detection cached
        runtime.stats_recorder().reset()
        server.set_fault(posts_only(fault))
        sent = server.count()
        result, elapsed = await timed_rerank(config)
        assert result is None
        assert dict((await stats_until(accounted)).fallbacks) == {reason: 1}
        assert any(r.method == "POST" for r in server.requests[sent:]), "the fault must have met our request"
        if reason == "timeout":  # the server holds its answer back (or sends it 5 s on): the deadline released us
            assert_released_at_deadline(elapsed, TIMEOUT)
        else:
            assert_released_within(elapsed, TIMEOUT)
    finally:
        await server.close()


@pytest.mark.parametrize("invalid_token_status", [401, 498])
async def test_a_key_cohere_no_longer_takes_forgets_the_route_whichever_status_says_so(
        invalid_token_status: int) -> None:
    """Cohere refuses a key it no longer takes with 401 or with 498 ("invalid api token"): either says the
    route no longer holds, so the next recall detects again (as the key changing at the server asks)."""
    server = await start_server("cohere", api_key="old-key", invalid_token_status=invalid_token_status)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=TIMEOUT, api_key="old-key", model="m")
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None  # detection cached
        server.protocol.api_key = "new-key"  # type: ignore[attr-defined]  # the key was revoked
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
        assert f"HTTP {invalid_token_status}" in runtime.statistics().last_error
        detections = runtime.statistics().detections
        server.protocol.api_key = "old-key"  # type: ignore[attr-defined]
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
        assert runtime.statistics().detections == detections + 1
    finally:
        await server.close()


async def test_a_tei_restarted_with_a_smaller_batch_limit_is_detected_again_and_the_recall_split() -> None:
    """TEI refuses more texts than its ``--max-client-batch-size`` (422 "batch size N > maximum allowed batch
    size M"). Restarted with a smaller one than detection read from ``/info``, the recall is split to the limit
    the refusal names and reranked; the refusal says nothing of the server's health."""
    server = await start_server("tei")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10, breaker_failures=1)
        docs = [f"{word} note {i}" for i, word in enumerate(("backup", "rotate", "lunch", "key", "menu") * 4)]
        assert await reranker.rerank_async(QUERY, docs[:2], config=config) is not None  # detected: 32 a request
        server.protocol.max_client_batch_size = 8  # type: ignore[attr-defined]  # restarted with 8
        sent = server.count()
        ranking = await reranker.rerank_async(QUERY, docs, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert ranking == sorted(((i, lexical_scorer(QUERY, d)) for i, d in enumerate(docs)),
                                 key=lambda pair: (-pair[1], pair[0]))
        texts = [len(r.json["texts"]) for r in server.requests[sent:] if r.json and "texts" in r.json]
        assert texts[0] == 20 and max(texts[1:]) <= 8  # refused once, then split
        stats = runtime.statistics()
        assert stats.fallback_total == 0 and stats.breakers[server.url] == "closed"
    finally:
        await server.close()


async def test_an_infinity_with_a_smaller_client_batch_limit_gets_requests_split_to_it() -> None:
    """Infinity run with a smaller ``INFINITY_MAX_CLIENT_BATCH_SIZE`` refuses more documents with FastAPI's 422 "List
    should have at most N items", and ``/models`` does not say N: every recall over it fell back. The recall is now
    split to N and reranked, and so are the later ones, without a refusal each."""
    server = await start_server("infinity", max_client_batch_size=8)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10, breaker_failures=1)
        docs = [f"{word} note {i}" for i, word in enumerate(("backup", "rotate", "lunch", "key", "menu") * 3)]
        assert await reranker.rerank_async(QUERY, docs[:2], config=config) is not None  # detected: 2048 a request
        for attempt in range(2):
            sent = server.count()
            ranking = await reranker.rerank_async(QUERY, docs, config=config)
            assert ranking is not None, runtime.statistics().last_error
            assert sorted(i for i, _ in ranking) == list(range(len(docs)))
            sizes = [len(r.json["documents"]) for r in server.requests[sent:] if r.json and "documents" in r.json]
            assert max(sizes[1:] if attempt == 0 else sizes) <= 8, sizes  # refused once, then split to 8
        stats = runtime.statistics()
        assert stats.fallback_total == 0 and stats.breakers[server.url] == "closed"
    finally:
        await server.close()


async def test_a_tei_taking_fewer_texts_a_request_than_the_probe_sends_is_detected() -> None:
    """TEI started with ``--max-client-batch-size 2`` (its ``/info`` says so): recalls are split to 2 texts, but the
    detection's probe sent its 4 in one request, TEI refused it (422), and every recall fell back."""
    server = await start_server("tei", max_client_batch_size=2)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10)
        docs = [f"document {i} about backup keys" if i % 3 == 0 else f"filler text number {i}" for i in range(6)]
        ranking = await reranker.rerank_async(QUERY, docs, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert ranking == sorted(((i, lexical_scorer(QUERY, d)) for i, d in enumerate(docs)),
                                 key=lambda pair: (-pair[1], pair[0]))
        assert max(len(r.json["texts"]) for r in server.requests if r.json and "texts" in r.json) == 2
    finally:
        await server.close()


SERVER_ERRORS = [
    ("vllm", {}, {"model": "nope"}, "does not exist"),
    ("infinity", {"models": ("a-ce", "b-ce")}, {"model": "nope"}, "Invalid model"),
    ("infinity", {"api_key": "right-key"}, {"api_key": "wrong-key"}, "Unauthorized"),
    ("tei", {"api_key": "right-key"}, {"api_key": "wrong-key"}, "unauthorized"),
    ("llamacpp", {"api_key": "right-key"}, {}, "Invalid API Key"),
    ("llamacpp", {"reranking": False}, {}, "does not support reranking"),
]


@pytest.mark.parametrize(("kind", "options", "settings", "words"), SERVER_ERRORS,
                         ids=[f"{c[0]}-{c[3]}" for c in SERVER_ERRORS])
async def test_each_servers_own_error_is_reported(kind: str, options: dict[str, Any], settings: dict[str, Any],
                                                   words: str) -> None:
    server = await start_server(kind, **options)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=TIMEOUT, **settings)
        result, elapsed = await timed_rerank(config)
        assert result is None
        assert_released_within(elapsed, TIMEOUT)
        report = await runtime.probe_async(config)
        assert not report.ok
        assert words.lower() in (report.message + " ".join(report.attempts)).lower()
        assert "wrong-key" not in json.dumps(report.as_dict()) + repr(runtime.statistics())
    finally:
        await server.close()


async def test_a_redirect_is_not_followed_and_is_explained() -> None:
    server = await start_server("vllm")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=TIMEOUT, api="rerank")
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
        from support.servers import Redirect

        server.set_fault(posts_only(Redirect(location="http://example.invalid/rerank")))
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
        assert "redirected" in runtime.statistics().last_error
    finally:
        await server.close()


async def test_invalid_input_and_settings_give_none_not_exceptions() -> None:
    assert await reranker.rerank_async(QUERY, DOCS, config={"rerank_endpoint": "ftp://nope"}) is None
    assert await reranker.rerank_async(QUERY, DOCS, config={"rerank_timeout": "soon"}) is None
    assert await reranker.rerank_async(QUERY, DOCS, config={}) is None  # no endpoint configured
    config = RerankerConfig(endpoint="http://127.0.0.1:9")
    assert await reranker.rerank_async(123, DOCS, config=config) is None  # type: ignore[arg-type]
    assert await reranker.rerank_async(QUERY, "not a list", config=config) is None  # type: ignore[arg-type]
    assert await reranker.rerank_async(QUERY, [1, 2], config=config) is None  # type: ignore[list-item]
    assert reranker.rerank(QUERY, DOCS, config={"rerank_enabled": False, "rerank_endpoint": "http://h:1"}) is None
    assert await reranker.rerank_async(QUERY, [], config=RerankerConfig(endpoint="http://127.0.0.1:9")) == []


async def test_a_caller_joining_a_longer_detection_is_counted_at_its_own_deadline() -> None:
    """Detections are shared by settings, not by deadline: a recall with a short timeout that joins one
    a patient caller started leaves at its own deadline, counted then, while the detection goes on."""
    server = await start_server("tei")
    try:
        server.gate.hold()  # detection's requests get no answer until released
        patient = asyncio.create_task(reranker.rerank_async(QUERY, DOCS, config=RerankerConfig(
            endpoint=server.url, timeout=30.0)))
        await server.gate.wait_held(1)
        impatient = RerankerConfig(endpoint=server.url, timeout=TIMEOUT)
        assert await reranker.rerank_async(QUERY, DOCS, config=impatient) is None
        stats = await stats_until(lambda s: s.fallbacks.get("timeout", 0) == 1)  # counted while detection runs
        assert not patient.done() and stats.reranks == 2
        server.gate.release()
        assert await patient is not None  # the shared detection ended well for the patient one
    finally:
        server.gate.release()
        await server.close()
