"""Large memories never stall the owner loop (secrets and edges, round three, finding 5).

A0 stores an imported knowledge file as one memory, a megabyte or more. Only ``rerank_max_doc_chars``
of each leaves the process, and an error text is masked with what was sent, so a failure that quotes
the documents costs the owner loop what it costs with memories no longer than that cut: the loop's longest
step is measured in the owner thread's own CPU time (so the machine's other load does not count), with
twenty 1 MB memories and with twenty at the cut, against a server that refuses each request quoting every
document it got, with escapes (a JSON list), as a ratio.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from reliability.hostile_servers import EchoWhatItReceived

from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

WORDS = [f"w{n:x}" for n in range(4096)]


def memories(size: int, seed: int) -> list[str]:
    """Twenty memories of about ``size`` characters, varied words with a newline now and then."""
    rng = random.Random(seed)
    out = []
    for k in range(20):
        words, length = [f"memory-{seed}-{k}"], 0
        while length < size:
            word = rng.choice(WORDS) + ("\n" if rng.random() < 0.05 else "")
            words.append(word)
            length += len(word) + 1
        out.append(" ".join(words))
    return out


class LongestStep:
    """On the owner loop: the most CPU time (of its own thread) the loop spent between two of this probe's
    wakeups, a millisecond apart: the longest step anything else took there."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.running = True

    async def watch(self) -> None:
        last = time.thread_time()
        while self.running:
            await asyncio.sleep(0.001)
            now = time.thread_time()
            self.longest = max(self.longest, now - last)
            last = now


async def longest_step_while_failing(config: RerankerConfig, docs: list[str], recalls: int) -> float:
    probe = LongestStep()
    watching = runtime.runtime().owner.submit(probe.watch)
    try:
        for n in range(recalls):
            result = await runtime.rerank_result_async(f"question {n} about the imported files", docs, config=config)
            assert result.ranking is None and result.reason == "http_status" and "***" in result.message
    finally:
        probe.running = False
        await asyncio.wrap_future(watching)
    return probe.longest


async def test_a_failure_quoting_megabyte_memories_costs_the_owner_loop_what_small_ones_cost() -> None:
    server = await start_server("vllm")
    try:
        config = RerankerConfig(endpoint=server.url, timeout=10, breaker_failures=1000, breaker_failure_rate=1)
        assert await runtime.rerank_async("warm up", ["first", "second"], config=config) is not None
        echo = EchoWhatItReceived("json")  # a JSON list: escapes in the text, the costly path
        server.set_fault(lambda request: echo if request.method == "POST" else None)
        at_cut = await longest_step_while_failing(config, memories(config.max_doc_chars, seed=1), recalls=5)
        large = await longest_step_while_failing(config, memories(1_000_000, seed=2), recalls=5)
    finally:
        await server.close()
    # Both send the same amount, so the same masking: measured 0.97-1.04x. Before: each message was masked
    # against every memory whole, JSON- and repr-encoded: 50-90x (1.7-2 s against 0.02-0.03 s).
    assert large <= 4 * max(at_cut, 0.002), (large, at_cut)

