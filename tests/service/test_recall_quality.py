"""Recall quality through the recall path's own function, ``rerank_pool``, against every dialect's loopback
server (issue 12): the relevance floor means the same on every server (llama.cpp's logits included) and
never applies on a fallback; a vLLM with the Qwen3 template applied server-side is used through
``/rerank`` with the configured instruction; the pool counters count what happened."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from support.servers import PREFIX, Respond, lexical_scorer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

from .test_every_dialect import CASES, DOCS, QUERY, expected_order, ids

pytestmark = pytest.mark.anyio

FLOOR = 0.5
# What the server's model makes of each memory, as a probability; llama.cpp sends the logit of it.
# logit(0.6) = 0.41 and logit(0.75) = 1.10: read raw against a floor of 0.5, llama.cpp would lose 0.6.
RELEVANCE = {"memory one": 0.05, "memory two": 0.45, "memory three": 0.2, "memory four": 0.6,
             "memory five": 0.92, "memory six": 0.75}
POOL = list(RELEVANCE)  # in "embedding" order: the stock top four holds three memories below the floor
LIMIT = 4
ABOVE_FLOOR = ["memory five", "memory six", "memory four"]  # the reranker's order, 0.45 and below dropped


def table_scorer(query: str, document: str) -> float:
    """The memories' relevance from the table; the detection probe's documents by the lexical scorer."""
    return RELEVANCE.get(document, lexical_scorer(query, document))


@dataclass(frozen=True)
class Case:
    kind: str
    options: dict[str, Any]
    settings: dict[str, Any]


FLOOR_CASES = [
    *(Case(kind, options, settings) for kind, options, settings, _ in CASES),
    Case("llamacpp", {"probabilities": True}, {}),  # a Qwen3 GGUF: P(yes), which a sigmoid would distort
    Case("vllm_qwen3", {}, {}),  # ends in qwen3_score
    Case("vllm_qwen3_templated", {}, {}),  # ends in /rerank
]


def case_id(case: Case) -> str:
    return ids((case.kind, case.options, case.settings, ""))


@pytest.mark.parametrize("case", FLOOR_CASES, ids=case_id)
async def test_the_floor_drops_the_same_memories_on_every_dialect(case: Case) -> None:
    server = await start_server(case.kind, scorer=table_scorer, **case.options)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5, min_score=FLOOR, **case.settings)
        outcome = await rerank_pool(QUERY, POOL, limit=LIMIT, config=config)
        assert outcome.applied, outcome.message
        assert outcome.documents == ABOVE_FLOOR
        assert outcome.floor_dropped == 1 and outcome.rescued == 2  # five and six were outside the stock top four
        assert outcome.relevance == pytest.approx(sorted(RELEVANCE.values(), reverse=True), abs=1e-3)
    finally:
        await server.close()


@pytest.mark.parametrize("api", ["auto", "rerank"])
async def test_llamacpp_logits_are_read_as_logits_in_auto_and_in_forced_mode(api: str) -> None:
    server = await start_server("llamacpp", scorer=table_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api=api, timeout=5, min_score=FLOOR)
        raw = await reranker.rerank_async(QUERY, POOL, config=config)
        assert raw is not None and min(score for _, score in raw) < 0  # the public API keeps the server's scores
        outcome = await rerank_pool(QUERY, POOL, limit=LIMIT, config=config)
        assert outcome.documents == ABOVE_FLOOR
    finally:
        await server.close()


@pytest.mark.parametrize("kind", ["llamacpp", "infinity", "vllm_qwen3"])
async def test_the_floor_never_applies_on_a_fallback_or_in_shadow_mode(kind: str) -> None:
    server = await start_server(kind, scorer=table_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5, min_score=FLOOR)
        assert (await rerank_pool(QUERY, POOL, limit=LIMIT, config=config)).applied  # detected and warm
        shadow = await rerank_pool(QUERY, POOL, limit=LIMIT, config=config.replace(apply=False))
        assert shadow.scored and shadow.documents == POOL[:LIMIT] and shadow.floor_dropped == 0
        server.set_fault(lambda request: Respond(500, {"error": "boom"}) if request.method == "POST" else None)
        failed = await rerank_pool(QUERY, POOL, limit=LIMIT, config=config)
        assert not failed.scored and failed.documents == POOL[:LIMIT]
        assert failed.floor_dropped == 0 and failed.rescued == 0
    finally:
        await server.close()


async def test_the_pool_counters_count_every_pool() -> None:
    server = await start_server("infinity", scorer=table_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5, min_score=FLOOR)
        await rerank_pool(QUERY, POOL, limit=LIMIT, config=config)  # 6 memories for 4: rescued 2, dropped 1
        await rerank_pool(QUERY, POOL[:3], limit=3, config=config)  # nothing to choose: all three below 0.5
        await rerank_pool(QUERY, POOL[:1], limit=1, config=config)  # one memory: not even sent
        pool = runtime.statistics().pool
        assert pool.recalls == 3 and pool.mean_size == pytest.approx((6 + 3 + 1) / 3)
        assert pool.starved_fraction == pytest.approx(2 / 3)
        assert pool.rescued == 2 and pool.floor_dropped == 1 + 3
        assert runtime.statistics().as_dict()["pool"] == {
            "recalls": 3, "mean_size": 3.33, "starved_fraction": 0.67, "rescued": 2, "floor_dropped": 4}
    finally:
        await server.close()


# --- vLLM with the Qwen3 template applied server-side --------------------------------------------

INSTRUCTION = "Given an agent's request, retrieve the memories that help it act"


async def test_vllm_with_the_qwen3_template_is_used_through_rerank_with_the_instruction() -> None:
    server = await start_server("vllm_qwen3_templated")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5, instruction=INSTRUCTION)
        ranking = await reranker.rerank_async(QUERY, DOCS, config=config)
        assert ranking is not None, runtime.statistics().last_error
        assert [index for index, _ in ranking] == expected_order()
        ours = server.requests[-1]
        assert ours.path == "/rerank" and ours.json["documents"] == DOCS
        assert ours.json["instruction"] == INSTRUCTION and ours.json["query"] == QUERY
        probes = {r.path for r in server.requests if r.method == "POST" and r.json["query" if r.path == "/rerank"
                                                                                   else "text_1"] != QUERY}
        assert {"/rerank", "/score"} <= probes  # both protocols were probed ...
        report = await runtime.probe_async(config)
        assert report.ok and report.api == "rerank" and report.path == "/rerank"
        assert any("qwen3_score /score: ranks correctly" in line for line in report.attempts)  # ... and both passed
        assert not any(PREFIX in r.text for r in server.requests if r.path == "/rerank")  # never templated twice
    finally:
        await server.close()


async def test_an_untemplated_qwen3_vllm_gets_no_instruction_field_on_score() -> None:
    server = await start_server("vllm_qwen3")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5, instruction=INSTRUCTION)
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
        last = server.requests[-1]
        assert last.path == "/score" and "instruction" not in last.json
        assert last.json["text_1"].startswith(PREFIX) and f"<Instruct>: {INSTRUCTION}\n" in last.json["text_1"]
    finally:
        await server.close()


@pytest.mark.parametrize("kind", ["vllm_qwen3_templated", "vllm_qwen3"])
async def test_a_changed_instruction_reaches_the_server_at_once(kind: str) -> None:
    """Routes are cached without the instruction, so every request carries the current one."""
    server = await start_server(kind)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5, instruction=INSTRUCTION)
        assert await reranker.rerank_async(QUERY, DOCS, config=config) is not None
        detected = len(server.requests)
        changed = config.replace(instruction="Find what the agent needs now")
        assert await reranker.rerank_async(QUERY, DOCS, config=changed) is not None
        [sent] = server.requests[detected:]  # no new detection: one request with the new instruction
        if kind == "vllm_qwen3_templated":
            assert sent.path == "/rerank" and sent.json["instruction"] == "Find what the agent needs now"
        else:
            assert sent.path == "/score" and "<Instruct>: Find what the agent needs now\n" in sent.json["text_1"]
    finally:
        await server.close()


async def test_replicas_on_different_scales_meet_on_the_probability_scale() -> None:
    """Replicas of one model served by different servers: Infinity's probabilities beside llama.cpp's
    logits. Whichever replica answers, the floor drops the same memories and the scores are
    probabilities."""
    servers = [await start_server("infinity", scorer=table_scorer), await start_server("llamacpp", scorer=table_scorer)]
    try:
        config = RerankerConfig(endpoint=", ".join(s.url for s in servers), timeout=5, min_score=FLOOR, hedge="off")
        for _ in range(60):
            outcome = await rerank_pool(QUERY, POOL, limit=LIMIT, config=config)
            assert outcome.applied, outcome.message
            assert outcome.documents == ABOVE_FLOOR
            assert outcome.relevance == pytest.approx(sorted(RELEVANCE.values(), reverse=True), abs=1e-3)
            if all(scored_by(s) >= 3 for s in servers):
                break
        assert all(scored_by(s) >= 3 for s in servers), [scored_by(s) for s in servers]  # both answered
    finally:
        for server in servers:
            await server.close()


def scored_by(server: Any) -> int:
    """The rerank requests a server answered (detection's probe aside, it carries other documents)."""
    return sum(1 for r in server.requests if r.method == "POST" and r.json and "memory one" in str(r.json))
