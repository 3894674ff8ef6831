"""Property tests (hypothesis): whatever the pool and whatever a server answers, a recall returns a
subset of its pool, at most ``limit`` long, without duplicates; the stock result on any fallback;
and exactly the server's ranking when (and only when) the answer is usable.

Two levels: the dialect parsers on arbitrary JSON (cheap, many examples), and the whole path, from
``rerank_pool`` through the batcher and a real loopback server whose answer hypothesis chooses.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from reliability.answer_faults import encode
from reliability.answer_plans import SHAPES, AnswerPlan, PlannedAnswer, answer_plans, pools
from reliability.kit import MARK, FakeDocument, config_for, make_pool, same_objects

from support.servers import RunningServer, serve_in_thread
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.dialects import ScoreBatch, WireAnswer
from usr.plugins.a0_reranker.core.dialects import catalog as cat
from usr.plugins.a0_reranker.core.errors import MalformedAnswer, ServerError
from usr.plugins.a0_reranker.core.scores import RecallOutcome
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

QUERY = f"{MARK} what did we decide about the backup keys"

# --- level 1: the parsers --------------------------------------------------------------------------

PARSERS = {
    "rerank_family": cat.infinity_dialect(),
    "voyage": cat.VOYAGE,
    "mixedbread": cat.MIXEDBREAD,
    "tei": cat.tei_dialect(),
    "qwen3_score": cat.qwen3_score_dialects("instruction")[0],
}
PARSER_SHAPE = {"rerank_family": "infinity", "voyage": "voyage", "mixedbread": "mixedbread", "tei": "tei",
                "qwen3_score": "vllm_qwen3"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(
        st.sampled_from(["results", "data", "index", "score", "relevance_score", "document", "object"]),
        inner, max_size=4),
    max_leaves=20,
)


def parsed(dialect: Any, body: bytes, status: int, n: int) -> list[float] | None:
    """The scores, or None when the dialect refused the answer as it must (never another error)."""
    batch = ScoreBatch.single("q", [f"document {i}" for i in range(n)])
    try:
        scores = dialect.parse(WireAnswer(status, body, "application/json"), batch)
    except (MalformedAnswer, ServerError):
        return None
    assert len(scores) == n and all(isinstance(s, float) and math.isfinite(s) for s in scores)
    return scores


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=150, deadline=None)
@given(value=json_values, n=st.integers(1, 6))
def test_any_json_is_parsed_to_one_finite_score_per_pair_or_refused(name: str, value: Any, n: int) -> None:
    parsed(PARSERS[name], encode(value), 200, n)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_planned_answer_is_used_exactly_when_usable(name: str, data: st.DataObject) -> None:
    documents = data.draw(st.lists(st.text(max_size=8), min_size=1, max_size=8, unique=True))
    plan: AnswerPlan = data.draw(answer_plans(documents))
    scores = parsed(PARSERS[name], encode(plan.body(documents, PARSER_SHAPE[name])), plan.status, len(documents))
    if plan.usable:
        assert scores == [plan.scores[doc] for doc in documents]
    else:
        assert scores is None


# --- level 2: the whole recall against a real server ---------------------------------------------


@pytest.fixture(scope="module", params=sorted(SHAPES))
def detected_server(request: pytest.FixtureRequest, portal: BlockingPortal) -> Iterator[tuple[RunningServer, Any]]:
    """One server per dialect shape, detection cached; the breaker kept out of the way, since
    damaged answers are expected here one after another."""
    with serve_in_thread(request.param) as server:
        config = config_for(request.param, server.url, breaker_failures=1000, breaker_failure_rate=1, timeout=2.0)
        warm = portal.call(functools.partial(rerank_pool, QUERY, make_pool(), limit=3, config=config))
        assert warm.applied, runtime.statistics().last_error
        yield server, config


def recall(portal: BlockingPortal, pool: list[FakeDocument], limit: int, config: RerankerConfig) -> RecallOutcome[Any]:
    return portal.call(functools.partial(rerank_pool, QUERY, pool, limit=limit, config=config))


def assert_recall_invariants(outcome: RecallOutcome[Any], pool: list[FakeDocument], limit: int) -> None:
    got = outcome.documents
    assert len(got) == min(limit, len(pool))
    assert len({id(d) for d in got}) == len(got)  # no memory twice
    assert all(any(d is p for p in pool) for d in got)  # nothing that was not in the pool
    if not outcome.applied:
        assert same_objects(got, pool[:limit])  # a fallback is exactly stock


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), texts=pools(), limit=st.integers(1, 12))
def test_a_recall_returns_a_subset_and_stock_on_any_failure(
    portal: BlockingPortal, detected_server: tuple[RunningServer, RerankerConfig], data: st.DataObject,
    texts: list[str], limit: int,
) -> None:
    server, config = detected_server
    plan: AnswerPlan = data.draw(answer_plans(texts))
    server.set_fault(lambda r: PlannedAnswer(plan, server.kind) if r.method == "POST" and MARK in r.text else None)
    pool = [FakeDocument(text) for text in texts]
    outcome = recall(portal, pool, limit, config)
    assert_recall_invariants(outcome, pool, limit)
    event("reranked" if outcome.applied else f"fallback: {outcome.reason}")
    if plan.usable or not any(text.strip() for text in texts):  # only blank texts: nothing to send, nothing to fail
        assert outcome.applied, outcome.message
        assert same_objects(outcome.documents, [pool[i] for i in plan.expected_order(texts)[:limit]])
    else:
        assert not outcome.applied and outcome.reason in {"malformed", "http_status"}, outcome


@pytest.mark.parametrize("size", [0, 1])
@pytest.mark.parametrize("limit", [1, 5])
def test_a_pool_too_small_to_rerank_is_returned_as_it_is(
    portal: BlockingPortal, detected_server: tuple[RunningServer, RerankerConfig], size: int, limit: int,
) -> None:
    server, config = detected_server
    before = len(server.requests)
    pool = make_pool()[:size]
    outcome = recall(portal, pool, limit, config)
    assert_recall_invariants(outcome, pool, limit)
    assert same_objects(outcome.documents, pool) and not outcome.scored
    assert len(server.requests) == before  # nothing was sent
