"""Issue 21: an answer that is not HTTP at all is a malformed answer, not a dead server.

A port that runs another service (SSH greets with its banner, Redis answers with an error), a status
line that is not one, a header line longer than aiohttp reads, a chunked body whose framing breaks:
aiohttp refuses each with its own reason, and that reason is what tells a user they typed the wrong
port. Each answer is counted ``malformed``, sent once (sending it again cannot help), not held against
the server as a refused connection is, and the message and Test connection name the reason, masked
as any server text is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from reliability.hostile_servers import (
    NOT_HTTP,
    NOT_HTTP_ANSWERS,
    REDIS_ERROR,
    SSH_BANNER,
    RawAnswer,
    other_service,
)
from reliability.kit import QUERY, TEXTS, config_for, is_ours, on_our_requests, shown_text, tracebacks

from support.servers import RunningServer
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

DOCS = list(TEXTS)
SECRET = "sk-live-0c1d2e3f-NOT-HTTP-DO-NOT-LEAK"


def ours(server: RunningServer) -> int:
    return sum(1 for r in server.requests if is_ours(r))


def gets(server: RunningServer) -> int:
    return sum(1 for r in server.requests if r.method == "GET")


@pytest.mark.parametrize("name", sorted(NOT_HTTP_ANSWERS))
async def test_an_answer_that_is_not_http_is_malformed_sent_once_and_named(
        serve: Any, everything_logged: Any, name: str) -> None:
    case = NOT_HTTP_ANSWERS[name]
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None  # detected, the route cached
    detection_gets = gets(server)
    server.set_fault(on_our_requests(RawAnswer(case.answer)))
    for recall in range(1, 4):
        if recall == 2:
            assert reranker.rerank(QUERY, DOCS, config=config) is None  # the blocking API, from a running loop
        else:
            assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
        assert ours(server) == 1 + recall, "one request per recall: sending it again cannot help"
    stats = runtime.statistics()
    assert dict(stats.fallbacks) == {"malformed": 3}, (stats.fallbacks, stats.last_error)
    assert stats.retries == 0 and stats.breakers[server.url] == "closed"  # answered badly, not down
    assert case.plainly in stats.last_error and case.reason in stats.last_error, stats.last_error
    assert gets(server) == detection_gets  # the route was kept
    assert tracebacks(everything_logged.records) == []


@pytest.mark.parametrize(("greeting", "reply", "said"), [
    (SSH_BANNER, b"", "b'SSH-2.0-OpenSSH_9.6'"),
    (b"", REDIS_ERROR, "b'-ERR unknown command'"),
], ids=["ssh", "redis"])
async def test_test_connection_at_a_port_that_runs_another_service_says_it_does_not_speak_http(
        everything_logged: Any, greeting: bytes, reply: bytes, said: str) -> None:
    with other_service(greeting, reply) as service:
        config = RerankerConfig(endpoint=service.url, timeout=5)
        report = await runtime.probe_async(config)
        assert not report.ok
        assert report.message.startswith(f"Not working: {service.url} {NOT_HTTP}"), report.message
        assert said in report.message, report.message
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
        reached = service.connections
    stats = runtime.statistics()
    assert dict(stats.fallbacks) == {"malformed": 1}, (stats.fallbacks, stats.last_error)
    assert NOT_HTTP in stats.last_error and said in stats.last_error, stats.last_error
    assert stats.breakers[service.url] == "closed"
    assert reached <= 2 * 4, "the GETs told it all: no probe was sent after them"
    assert tracebacks(everything_logged.records) == []


@pytest.mark.parametrize("name", sorted(set(NOT_HTTP_ANSWERS) - {"ssh_banner", "redis_error"}))
async def test_test_connection_names_what_is_wrong_with_the_http(serve: Any, name: str) -> None:
    case = NOT_HTTP_ANSWERS[name]
    server = serve("vllm")
    server.set_fault(RawAnswer(case.answer))
    report = await runtime.probe_async(config_for("vllm", server.url, timeout=5))
    assert not report.ok
    assert report.message.startswith(f"Not working: the answer of {server.url} {case.plainly}"), report.message
    assert case.reason in report.message, report.message


@dataclass(frozen=True)
class ReflectTheKeyIntoAStatusLine:
    """A broken proxy that writes the Authorization header it received back as its status line."""

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        return await RawAnswer(f"{request.headers.get('Authorization', '')}\r\n\r\n".encode()).apply(request, proceed)


async def test_a_key_quoted_in_aiohttps_reason_is_masked(serve: Any, everything_logged: Any) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5, api_key=SECRET)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
    server.set_fault(ReflectTheKeyIntoAStatusLine())
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    report = await runtime.probe_async(config)
    assert not report.ok and NOT_HTTP in report.message and "Bearer ***" in report.message, report.message
    last_error = runtime.statistics().last_error
    assert dict(runtime.statistics().fallbacks) == {"malformed": 1}
    assert NOT_HTTP in last_error and "Bearer ***" in last_error, last_error
    shown = json.dumps(report.as_dict()) + shown_text(everything_logged, report)
    assert SECRET not in shown and SECRET[:12] not in shown
