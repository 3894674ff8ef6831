"""Integration tier, replicas: two real Infinity processes on loopback listed in ``rerank_endpoint``.
One is killed mid-run (SIGKILL: its sockets close, later connections are refused); no recall is lost,
and every ranking still equals Infinity's own order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from integration import infinity_model as im
from integration.infinity_server import InfinityServer, run_infinity
from integration.test_infinity_server import GRADED, rerank

pytestmark = pytest.mark.integration

CASES = [(im.PROBE_QUERY, GRADED)] + [(q, [irr, rel]) for q, rel, irr in im.HELD_OUT]  # no ties to resolve
RECALLS, CONCURRENCY = 600, 8  # a few seconds: long enough for the hedging delay to settle
KILL_AT = RECALLS // 3  # recalls back when the first replica is killed
EJECTION_PATIENCE_S = 60.0  # a bound only: the failure cost halves every 5 s, so a few tries come well before


@pytest.fixture(scope="module")
def two_replicas(
    infinity_python: str, tiny_model: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[InfinityServer, InfinityServer]]:
    with ExitStack() as stack:
        first, second = (
            stack.enter_context(run_infinity(infinity_python, tiny_model[0], workdir=tmp_path_factory.mktemp(name)))
            for name in ("replica-a", "replica-b")
        )
        yield first, second


def infinity_order(server: InfinityServer, query: str, documents: list[str]) -> list[int]:
    return [r["index"] for r in rerank(server, query, documents)["results"]]


@pytest.mark.anyio
async def test_killing_one_replica_mid_run_loses_no_recall(two_replicas: tuple[InfinityServer, InfinityServer]) -> None:
    from usr.plugins.a0_reranker.core.config import RerankerConfig
    from usr.plugins.a0_reranker.helpers import reranker
    from usr.plugins.a0_reranker.service import runtime

    first, second = two_replicas
    expected = [infinity_order(second, query, docs) for query, docs in CASES]
    assert expected == [infinity_order(first, query, docs) for query, docs in CASES]  # the same model twice
    config = RerankerConfig(endpoint=f"{first.root_url}, {second.root_url}", timeout=20)
    runtime.shutdown()  # a fresh owner loop: no breaker or route of another module
    runtime.stats_recorder().reset()  # counters of this run only (they are kept for the process)
    rankings: list[tuple[int, list[tuple[int, float]] | None]] = []
    pending = iter(range(RECALLS))

    def dead_replica_ejected() -> bool:
        return any(r.url == first.root_url and r.breaker != "closed" for r in runtime.statistics().replicas)

    async def recall(n: int) -> None:
        query, docs = CASES[n % len(CASES)]
        rankings.append((n % len(CASES), await reranker.rerank_async(query, docs, config=config)))

    async def agent() -> None:
        for n in pending:
            await recall(n)
            if len(rankings) == KILL_AT:
                first.kill()
        # The balancer leaves a failing replica alone (its recent failures raise its cost), so the dead one
        # is tried again only as they fade, and its third refusal in a row ejects it; on a busy machine
        # a run once ended before it was. Recalls go on, each checked like the rest, until it is ejected.
        give_up_at = time.monotonic() + EJECTION_PATIENCE_S
        while not dead_replica_ejected() and time.monotonic() < give_up_at:
            await recall(len(rankings))

    await asyncio.gather(*(agent() for _ in range(CONCURRENCY)))
    stats = runtime.statistics()
    shown = (f"fallbacks {dict(stats.fallbacks)}, retries {stats.retries}, failovers {stats.failovers}, hedges "
             f"{stats.hedges}, retry budget exhausted {stats.retry_budget_exhausted}, last error {stats.last_error!r}, "
             f"recalls {len(rankings)}")
    assert len(rankings) >= RECALLS
    lost = [case for case, ranking in rankings if ranking is None]
    assert lost == [], f"{len(lost)} recalls fell back: {shown}"
    wrong = [case for case, ranking in rankings if ranking is not None and [i for i, _ in ranking] != expected[case]]
    assert wrong == []
    replicas = {r.url: r for r in stats.replicas}
    dead, survivor = replicas[first.root_url], replicas[second.root_url]
    assert dead.pairs > 0 and survivor.pairs > dead.pairs, shown  # both carried recalls, the survivor the rest
    assert dead.breaker != "closed", shown  # the dead one was ejected
