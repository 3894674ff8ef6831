"""Bursts over replicas: a wave of sub-agents recalls at once and waits for all of them together.

Each wave is ``size`` recalls (32) of ``documents`` memories (20) started at the same instant and
awaited together, as a wave of sub-agents is; the next wave starts once the last recall of the one
before is back. Against 1 and against N replicas of a model whose pairs dominate its cost (the
replica benchmark's big model: 10 ms a pass plus 0.5 ms a pair), each in its own process. What
counts is how long a wave takes: the slowest replica's share sets it, so a split that leaves one
replica with more than its share of the burst shows here and not in the closed-loop throughput.
Sets alternate round by round, each with a fresh owner loop; the figure is the median wave time.

    python -m a0_reranker.bench.burst_bench --replicas 3 --waves 30 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..service import runtime
from .batching_bench import batched_config, workload
from .cost_model_server import CostModelServer
from .replicas_bench import BIG_MODEL


@dataclass(frozen=True)
class WaveRun:
    replicas: int
    round: int
    wave_ms: list[float]
    fallbacks: int

    @property
    def median_ms(self) -> float:
        return statistics.median(self.wave_ms)


async def run_waves(urls: Sequence[str], *, waves: int, size: int, documents: int, round_: int) -> WaveRun:
    """A fresh owner loop, two warm-up waves, then ``waves`` measured ones."""
    runtime.shutdown()
    config = batched_config(",".join(urls))
    fallbacks = 0
    times: list[float] = []
    for wave in range(waves + 2):
        recalls = [workload(wave * size + i, documents) for i in range(size)]
        started = time.perf_counter()
        results = await asyncio.gather(*(runtime.rerank_async(q, d, config=config) for q, d in recalls))
        if wave >= 2:
            times.append((time.perf_counter() - started) * 1000)
            fallbacks += sum(r is None for r in results)
    runtime.shutdown()
    return WaveRun(len(urls), round_, times, fallbacks)


async def compare(urls: Sequence[str], *, waves: int, size: int, documents: int, rounds: int) -> list[WaveRun]:
    runs = []
    for round_ in range(1, rounds + 1):
        for count in (1, len(urls)):
            runs.append(await run_waves(urls[:count], waves=waves, size=size, documents=documents, round_=round_))
    return runs


def report(runs: Sequence[WaveRun]) -> str:
    one = statistics.median(r.median_ms for r in runs if r.replicas == 1)
    lines = []
    for count in sorted({r.replicas for r in runs}):
        mine = [r for r in runs if r.replicas == count]
        median = statistics.median(r.median_ms for r in mine)
        rounds = ", ".join(f"{r.median_ms:.0f}" for r in mine)
        lines.append(f"{count} replica(s): wave {median:.0f} ms (rounds: {rounds} ms), {one / median:.2f}x one; "
                     f"fallbacks {sum(r.fallbacks for r in mine)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--waves", type=int, default=30)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(CostModelServer(BIG_MODEL)).url for _ in range(args.replicas)]
        runs = asyncio.run(compare(urls, waves=args.waves, size=args.size, documents=args.documents,
                                   rounds=args.rounds))
    print(report(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
