"""The programmatic API's scores and their scale (issue 23, item 10): by default each server's own
scores, as before (llama.cpp's raw logits beside others' probabilities); with ``scale="probability"``
every server's on the one 0-1 scale the recall path's relevance floor uses."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service.runtime import rerank_pool

from .test_recall_quality import FLOOR_CASES, POOL, QUERY, RELEVANCE, Case, case_id, table_scorer

pytestmark = pytest.mark.anyio

BEST_FIRST = sorted(RELEVANCE.values(), reverse=True)


def scores(ranking: Any) -> list[float]:
    assert ranking is not None
    return [score for _, score in ranking]


@pytest.mark.parametrize("case", FLOOR_CASES, ids=case_id)
async def test_every_server_gives_the_floors_scale_when_asked(case: Case) -> None:
    server = await start_server(case.kind, scorer=table_scorer, **case.options)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5, **case.settings)
        own = await reranker.rerank_async(QUERY, POOL, config=config)
        scaled = await reranker.rerank_async(QUERY, POOL, config=config, scale="probability")
        blocking = await asyncio.to_thread(reranker.rerank, QUERY, POOL, config=config, scale="probability")
        recall = await rerank_pool(QUERY, POOL, limit=len(POOL), config=config)
    finally:
        await server.close()
    assert scores(scaled) == pytest.approx(BEST_FIRST, abs=1e-3)  # the model's relevance, on every server
    assert scaled == blocking
    assert scores(scaled) == pytest.approx(recall.relevance)  # the scale rerank_min_score is compared on
    assert [index for index, _ in scaled] == [index for index, _ in own or []]  # the same order as the server's


async def test_llamacpps_logits_stay_the_default_and_the_probability_is_their_sigmoid() -> None:
    server = await start_server("llamacpp", scorer=table_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5)
        own = await reranker.rerank_async(QUERY, POOL, config=config)
        scaled = await reranker.rerank_async(QUERY, POOL, config=config, scale="probability")
    finally:
        await server.close()
    assert min(scores(own)) < 0 < max(scores(own))  # raw logits, as the API always returned them
    assert scores(scaled) == pytest.approx([1 / (1 + math.exp(-logit)) for logit in scores(own)])


async def test_replicas_of_different_scales_meet_on_the_probability_scale() -> None:
    logits, probabilities = (await start_server("llamacpp", scorer=table_scorer),
                             await start_server("tei", scorer=table_scorer))
    try:
        config = RerankerConfig(endpoint=f"{logits.url}, {probabilities.url}", timeout=5)
        for _ in range(4):  # whichever replica answers
            scaled = await reranker.rerank_async(QUERY, POOL, config=config, scale="probability")
            assert scores(scaled) == pytest.approx(BEST_FIRST, abs=1e-3)
    finally:
        await logits.close()
        await probabilities.close()


@pytest.mark.parametrize("scale", ["logit", "", None, 1])
async def test_an_unknown_scale_is_no_ranking_and_no_error(scale: Any) -> None:
    server = await start_server("tei", scorer=table_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, timeout=5)
        assert await reranker.rerank_async(QUERY, POOL, config=config, scale=scale) is None
        assert await asyncio.to_thread(reranker.rerank, QUERY, POOL, config=config, scale=scale) is None
    finally:
        await server.close()
