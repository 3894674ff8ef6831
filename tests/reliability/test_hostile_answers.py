"""Issue 15 through the public API: hostile answers, odd input and secrets at the edges.

Every case the review reproduced has a test here: answers that broke the parser are malformed answers
(counted ``malformed``, never ``error``, no traceback, the cached route kept), memory text the server
quotes back as it was cut is masked, a key reflected into model ids is masked in the report, URLs that
crashed validation are settings problems, and bad config values or a documents sequence that fails
give None and a counted fallback, never an exception.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from reliability.answer_faults import MUTATIONS, DamagedAnswer
from reliability.hostile_servers import (
    HOSTILE_SERVERS,
    MODELS_CAPABILITIES_AN_INTEGER,
    MODELS_ENTRY_NOT_AN_OBJECT,
    EchoWhatItReceived,
    ReflectAuthorizationIntoModels,
    on_listings,
)
from reliability.kit import MARK, QUERY, TEXTS, config_for, on_our_requests, shown_text, tracebacks

from support.servers import Respond, RunningServer
from usr.plugins.a0_reranker.a0_hooks import api_handlers
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.errors import ConfigError
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

SECRET = "sk-live-7f3a9c2e-DO-NOT-LEAK"
DOCS = list(TEXTS)


def gets(server: RunningServer) -> int:
    return sum(1 for r in server.requests if r.method == "GET")


def fallbacks() -> dict[str, int]:
    return dict(runtime.statistics().fallbacks)


# --- answers that broke the parser ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HOSTILE_SERVERS))
async def test_a_hostile_server_gives_none_and_a_report_never_an_internal_error(
        serve: Any, everything_logged: Any, name: str) -> None:
    kind, rule = HOSTILE_SERVERS[name]
    server = serve(kind)
    server.set_fault(rule)
    config = config_for(kind, server.url, timeout=5)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    report = await runtime.probe_async(config)
    assert not report.ok and report.message.startswith("Not working:"), report
    assert "error" not in fallbacks() and fallbacks(), fallbacks()
    assert tracebacks(everything_logged.records) == []


SCORE_10E400 = DamagedAnswer(MUTATIONS["score_integer_too_large_for_a_float"])


async def test_a_score_too_large_for_a_float_is_malformed_and_keeps_the_route(
        serve: Any, everything_logged: Any) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5, breaker_failures=1000)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None  # detected and cached
    detection_gets = gets(server)
    server.set_fault(on_our_requests(SCORE_10E400))
    for _ in range(10):
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    assert fallbacks() == {"malformed": 10}
    assert "integer of more than 320 digits" in runtime.statistics().last_error
    server.set_fault(None)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
    assert gets(server) == detection_gets  # the route was kept: no detection ran again
    assert tracebacks(everything_logged.records) == []


async def test_malformed_answers_are_reported_to_the_breaker(serve: Any) -> None:
    """A server that answers, but only malformed answers, opens the breaker by its failure rate (once
    the breaker has seen enough attempts), as any other failing server does."""
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5, breaker_cooldown=3600)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
    server.set_fault(on_our_requests(SCORE_10E400))
    for _ in range(40):
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    counted = fallbacks()
    assert counted.get("malformed", 0) >= 1 and counted.get("breaker_open", 0) >= 1, counted
    assert set(counted) == {"malformed", "breaker_open"}
    assert runtime.statistics().breakers[server.url] == "open"


async def test_a_422_whose_loc_is_a_number_is_an_http_error_with_its_message(
        serve: Any, everything_logged: Any) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
    server.set_fault(on_our_requests(Respond(422, {"detail": [{"loc": 5, "msg": "Field required"}]})))
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    assert fallbacks() == {"http_status": 1}
    assert runtime.statistics().last_error == "HTTP 422: Field required"
    assert tracebacks(everything_logged.records) == []


@pytest.mark.parametrize("listing", [MODELS_ENTRY_NOT_AN_OBJECT, MODELS_CAPABILITIES_AN_INTEGER],
                         ids=["entry_not_an_object", "capabilities_an_integer"])
async def test_ten_calls_against_a_hostile_models_listing_make_the_gets_of_one_detection(
        serve: Any, everything_logged: Any, listing: dict[str, Any]) -> None:
    server = serve("infinity")
    server.set_fault(on_listings(Respond(200, listing), frozenset({"/models"})))  # Infinity's own listing route
    config = config_for("infinity", server.url, timeout=5)
    for _ in range(10):
        ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
        assert ranking is not None and sorted(i for i, _ in ranking) == list(range(len(DOCS)))
    assert gets(server) == 4  # /info, /v1/models, /models, /api/version: once
    assert fallbacks() == {}
    assert tracebacks(everything_logged.records) == []


async def test_json_nested_100000_deep_on_the_rerank_route_is_malformed(serve: Any, everything_logged: Any) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5)
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
    server.set_fault(on_our_requests(Respond(200, b"[" * 100_000 + b"]" * 100_000, "application/json")))
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    assert fallbacks() == {"malformed": 1} and "nested too deeply" in runtime.statistics().last_error
    assert tracebacks(everything_logged.records) == []


# --- secrets and memory text at the edges ------------------------------------------------------------------


# Memories with newlines, runs of spaces and unicode, all longer than the cut the test sets (64), and a
# query longer than its cut (48), as A0's queries are longer than rerank_max_query_chars.
LONG_QUERY = f"{MARK} where did we put  the\nbackup keys — café ☕ 東京, and who rotates them every ninety days?"
LONG_DOCS = [
    f"{MARK} the backup key\n  lives in the vault; rotate it   every ninety days (admin team) — naïve, 東京 ☕",
    f"{MARK}\tcafeteria menu:\n\n  soup on Tuesdays, curry on Fridays, and the parking garage closes at nine",
    f"{MARK} backup jobs   run nightly at two; their logs go to the ops bucket for thirty days ✓✓✓",
]


def assert_no_memory_text(shown: str, docs: Sequence[str] = LONG_DOCS) -> None:
    flat = " ".join(shown.split())
    assert MARK not in flat, shown
    for text in (LONG_QUERY, *docs):
        words = " ".join(text.split())
        assert not any(words[i : i + 16] in flat for i in range(len(words) - 16)), (words, shown)


@pytest.mark.parametrize("style", ["received", "flattened", "repr", "json"])
async def test_memory_text_quoted_back_as_it_was_cut_is_masked(serve: Any, everything_logged: Any, style: str) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5, max_doc_chars=64, max_query_chars=48)
    assert await reranker.rerank_async(LONG_QUERY, LONG_DOCS, config=config) is not None
    server.set_fault(on_our_requests(EchoWhatItReceived(style)))
    assert await reranker.rerank_async(LONG_QUERY, LONG_DOCS, config=config) is None
    ours = [r for r in server.requests if r.method == "POST" and MARK in r.text][-1]
    assert all(len(d) <= 64 for d in ours.json.get("documents", [])), "the documents were cut when sent"
    last_error = runtime.statistics().last_error
    assert last_error.startswith("HTTP 400: cannot score 4 inputs:") and "***" in last_error
    assert_no_memory_text(shown_text(everything_logged))


OTHER_AGENTS_DOCS = [f"{MARK} payroll export for the finance team runs on the first Monday",
                     f"{MARK} the staging database password rotates with the quarterly audit"]


async def test_recalls_sharing_a_request_never_see_each_others_memories(serve: Any, everything_logged: Any) -> None:
    """Two agents recall with the same query: one request carries both their memories, and the server
    refuses it quoting everything it got. Each agent's fallback message, ``last_error`` and the log
    have every memory the request carried masked, the other agent's as well as its own. The window is the
    longest, so the second recall joins the first's request however late a loaded machine lets it arrive."""
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5, batch_window_ms=1000)
    assert await reranker.rerank_async("warm up", ["first", "second"], config=config) is not None
    server.gate.hold(lambda r: r.method == "POST")
    first = asyncio.create_task(runtime.rerank_result_async("another question", ["x", "y"], config=config))
    await server.gate.wait_held(1)
    mine = asyncio.create_task(runtime.rerank_result_async(LONG_QUERY, LONG_DOCS, config=config))
    theirs = asyncio.create_task(runtime.rerank_result_async(LONG_QUERY, OTHER_AGENTS_DOCS, config=config))
    await server.gate.wait_held(2)  # the shared request, at the gate (its queued state lasts one window)
    server.set_fault(on_our_requests(EchoWhatItReceived("received")))
    server.gate.release()
    await first
    results = [await mine, await theirs]
    [shared] = [r for r in server.requests if r.method == "POST" and r.json.get("query") == LONG_QUERY]
    assert sorted(shared.json["documents"]) == sorted(LONG_DOCS + OTHER_AGENTS_DOCS)  # one request carried both
    for result in results:
        assert result.ranking is None and result.reason == "http_status" and "***" in result.message
        assert_no_memory_text(result.message, LONG_DOCS + OTHER_AGENTS_DOCS)
    assert_no_memory_text(shown_text(everything_logged), LONG_DOCS + OTHER_AGENTS_DOCS)


async def test_a_key_reflected_into_model_ids_is_masked_in_the_report(serve: Any, everything_logged: Any) -> None:
    server = serve("llamacpp", api_key=SECRET)  # llama.cpp scores with whatever model id it is sent
    server.set_fault(on_listings(ReflectAuthorizationIntoModels()))
    config = config_for("llamacpp", server.url, timeout=5, api_key=SECRET)
    report = await runtime.probe_async(config)
    assert report.ok and report.model == "Bearer *** (reflected)", report
    shown = json.dumps(report.as_dict()) + shown_text(everything_logged, report)
    assert SECRET not in shown and SECRET[:12] not in shown


@pytest.mark.parametrize("key", [f"{SECRET[:8]}\n{SECRET[8:]}", f"{SECRET}\r\nX-Injected: 1", f"{SECRET}\x00"])
async def test_an_api_key_with_a_control_character_is_a_config_fallback(
        serve: Any, everything_logged: Any, key: str) -> None:
    server = serve("vllm")
    settings = {"rerank_endpoint": server.url, "rerank_api_key": key, "rerank_timeout": 5}
    assert await reranker.rerank_async(QUERY, DOCS, config=settings) is None
    assert reranker.rerank(QUERY, DOCS, config=settings) is None
    assert fallbacks() == {"config": 2} and "rerank_api_key" in runtime.statistics().last_error
    assert server.requests == []
    shown = shown_text(everything_logged)
    assert SECRET[:8] not in shown and tracebacks(everything_logged.records) == []


# --- settings and input that crashed before ----------------------------------------------------------------

BAD_URLS = ["http://[::1", "http://[127.0.0.1]:80", "http://ex℀ample.com"]


@pytest.mark.parametrize("url", BAD_URLS)
async def test_a_url_urlsplit_cannot_read_is_a_named_settings_problem(everything_logged: Any, url: str) -> None:
    with pytest.raises(ConfigError, match="rerank_endpoint"):
        RerankerConfig(endpoint=url)
    assert reranker.rerank(QUERY, DOCS, config={"rerank_endpoint": url}) is None
    assert await reranker.rerank_async(QUERY, DOCS, config={"rerank_endpoint": url}) is None
    assert fallbacks() == {"config": 2}
    reply = await api_handlers.test_connection({"config": {"rerank_endpoint": url}})
    assert not reply["success"] and "rerank_endpoint" in reply["message"]
    assert "the URL has a malformed host" in reply["errors"]["rerank_endpoint"]
    assert tracebacks(everything_logged.records) == []


@pytest.mark.parametrize("config", [
    {"rerank_endpoint": "http://127.0.0.1:9", "rerank_timeout": 10**400},
    {"rerank_endpoint": "http://127.0.0.1:9", "rerank_max_queued_pairs": 10**5000},
    "text",
    ["rerank_endpoint", "http://127.0.0.1:9"],
], ids=["timeout_10e400", "queue_10e5000", "a_string", "a_list"])
async def test_a_bad_config_value_gives_none_and_a_counted_config_fallback(everything_logged: Any, config: Any) -> None:
    assert reranker.rerank(QUERY, DOCS, config=config) is None
    assert await reranker.rerank_async(QUERY, DOCS, config=config) is None
    assert fallbacks() == {"config": 2}
    assert tracebacks(everything_logged.records) == []


async def test_a_non_config_given_to_the_service_runtime_is_a_counted_config_fallback(everything_logged: Any) -> None:
    assert runtime.rerank(QUERY, DOCS, config="text") is None  # type: ignore[arg-type]
    assert await runtime.rerank_async(QUERY, DOCS, config="text") is None  # type: ignore[arg-type]
    assert fallbacks() == {"config": 2}
    assert not runtime.probe("text").ok and not (await runtime.probe_async("text")).ok  # type: ignore[arg-type]
    assert tracebacks(everything_logged.records) == []


class FailingDocuments(Sequence[str]):
    """A documents sequence whose iteration raises part-way, as a lazy or broken container might."""

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: Any) -> Any:
        if index == 1:
            raise RuntimeError("the store went away")
        if isinstance(index, int) and 0 <= index < 3:
            return "a memory"
        raise IndexError(index)


async def test_a_documents_sequence_whose_iteration_raises_gives_none(serve: Any, everything_logged: Any) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5)
    assert reranker.rerank(QUERY, FailingDocuments(), config=config) is None
    assert await reranker.rerank_async(QUERY, FailingDocuments(), config=config) is None
    assert await runtime.rerank_result_async(QUERY, FailingDocuments(), config=config) is not None
    assert fallbacks() == {"bad_input": 3}
    assert server.requests == []
    assert tracebacks(everything_logged.records) == []


class FailsWhenReadAgain(Sequence[str]):
    """Documents that pass the first look and fail when iterated again, as a one-shot source might."""

    def __init__(self) -> None:
        self.iterations = 0

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: Any) -> Any:
        return ["a memory", "another memory"][index]

    def __iter__(self) -> Any:
        self.iterations += 1
        if self.iterations > 1:
            raise RuntimeError("the store went away")
        return iter(["a memory", "another memory"])


async def test_documents_that_fail_when_read_again_are_the_callers_bad_input(serve: Any,
                                                                               everything_logged: Any) -> None:
    """Not "the reranker's event loop is not available": the caller's documents failed, in both forms."""
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5)
    blocking = await asyncio.to_thread(runtime.rerank_result, QUERY, FailsWhenReadAgain(), config=config)
    awaited = await runtime.rerank_result_async(QUERY, FailsWhenReadAgain(), config=config)
    for result in (blocking, awaited):
        assert (result.ranking, result.reason) == (None, "bad_input"), result
        assert "documents" in result.message and "event loop" not in result.message, result.message
    assert fallbacks() == {"bad_input": 2} and server.requests == []
    logged = " ".join(r.getMessage() for r in everything_logged.records if r.name == "a0_reranker")
    assert "event loop" not in logged and "unexpected" not in logged, logged
    assert tracebacks(everything_logged.records) == []


async def test_one_call_larger_than_the_queue_bound_goes_through_on_an_idle_engine(serve: Any) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=5, max_queued_pairs=4)
    ranking = await reranker.rerank_async(QUERY, DOCS, config=config)  # 8 distinct documents, nothing queued
    assert ranking is not None and len(ranking) == len(DOCS), fallbacks()
