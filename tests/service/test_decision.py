"""One decision per handed-over rerank: the owner loop's outcome, or the caller's backstop timeout,
whichever comes first; the one the caller returns is the one counted. Through the real service against a
loopback vLLM server, with the decision taken in each order (a busy machine decides which comes first)."""

from __future__ import annotations

import threading
import time

import pytest

from support.encoding import encoding_scorer, recall
from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.statistics import StatsRecorder
from usr.plugins.a0_reranker.service.decision import Decision
from usr.plugins.a0_reranker.service.reranker_service import RerankResult, RerankService

pytestmark = pytest.mark.anyio


def test_whoever_comes_first_decides_and_the_other_learns_it() -> None:
    owner_first: Decision[str] = Decision()
    assert owner_first.decide("ranked")
    assert owner_first.give_up() == (True, "ranked") and not owner_first.given_up  # the caller returns it
    caller_first: Decision[str] = Decision()
    assert caller_first.give_up() == (False, None) and caller_first.given_up
    assert not caller_first.decide("ranked")  # too late: the owner counts the caller's timeout


def test_from_two_threads_exactly_one_side_wins() -> None:
    for _ in range(200):
        decision: Decision[str] = Decision()
        start = threading.Barrier(2)
        results: dict[str, object] = {}

        def owner(d: Decision[str] = decision, s: threading.Barrier = start, out: dict[str, object] = results
                  ) -> None:
            s.wait()
            out["owner"] = d.decide("ranked")

        thread = threading.Thread(target=owner)
        thread.start()
        start.wait()
        results["caller"] = decision.give_up()
        thread.join()
        assert (results["owner"], results["caller"]) in {(True, (True, "ranked")), (False, (False, None))}


async def test_the_service_counts_the_outcome_the_caller_returns() -> None:
    service = RerankService(StatsRecorder())
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=10.0)
        kept: Decision[RerankResult] = Decision()
        result = await service.rerank(*recall(0, 4), config, time.monotonic() + 10, kept)
        assert result.ranking is not None
        assert kept.give_up() == (True, result)  # a backstop firing now returns the owner's ranking
        assert (service.statistics().reranked, dict(service.statistics().fallbacks)) == (1, {})

        late: Decision[RerankResult] = Decision()
        assert late.give_up() == (False, None)  # the backstop fired before the owner loop decided
        result = await service.rerank(*recall(1, 4), config, time.monotonic() + 10, late)
        assert result.ranking is not None  # scored, but it reaches nobody
        stats = service.statistics()
        assert (stats.reranked, dict(stats.fallbacks)) == (1, {"timeout": 1})  # counted as what the caller got
        assert stats.reranks == stats.reranked + stats.fallback_total + stats.cancelled
    finally:
        await service.close()
        await server.close()
