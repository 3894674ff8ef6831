"""The sync and async facades from plain threads, from threads running their own loops, and from two
loops at once, against one real loopback server (issue: micro-batcher, acceptance 3)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from support.encoding import encoding_scorer, recall
from support.servers import serve_in_thread
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime


@pytest.fixture
def threaded_server() -> Iterator[str]:
    with serve_in_thread("vllm_qwen3", scorer=encoding_scorer) as server:
        yield server.url


def test_rerank_from_plain_threads_and_from_threads_running_their_own_loops(threaded_server: str) -> None:
    config = RerankerConfig(endpoint=threaded_server, api="qwen3_score", timeout=10)
    results: dict[tuple[str, int], object] = {}

    def plain(q: int) -> None:
        results[("plain", q)] = runtime.rerank(*recall(q, 3), config=config)

    def inside_a_running_loop(q: int) -> None:
        async def main() -> None:
            results[("sync in a running loop", q)] = runtime.rerank(*recall(q, 3), config=config)  # blocks this loop only
            results[("async", q + 50)] = await runtime.rerank_async(*recall(q + 50, 3), config=config)

        asyncio.run(main())

    threads = [threading.Thread(target=plain, args=(q,)) for q in range(4)]
    threads += [threading.Thread(target=inside_a_running_loop, args=(q,)) for q in range(10, 13)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 10
    for (name, q), ranking in results.items():
        assert ranking == [(2, q / 100 + 0.0002), (1, q / 100 + 0.0001), (0, q / 100)], name


def test_rerank_async_from_two_loops_at_once(threaded_server: str) -> None:
    config = RerankerConfig(endpoint=threaded_server, api="qwen3_score", timeout=10)
    outcomes: list[list[object]] = []
    barrier = threading.Barrier(2)

    def loop_thread(offset: int) -> None:
        async def main() -> list[object]:
            barrier.wait()
            return list(await asyncio.gather(*(runtime.rerank_async(*recall(offset + i, 4), config=config)
                                               for i in range(8))))

        outcomes.append(asyncio.run(main()))

    threads = [threading.Thread(target=loop_thread, args=(offset,)) for offset in (0, 20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    flat = [r for outcome in outcomes for r in outcome]
    assert len(flat) == 16 and all(r is not None for r in flat)
    assert {round(r[0][1] * 100) for r in flat} == set(range(8)) | set(range(20, 28))  # type: ignore[index]


