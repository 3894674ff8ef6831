"""Two agents with different ``rerank_timeout`` at one overloaded server: what share of each one's recalls is
reranked, and how much of the server's capacity is used.

The server is ``overload_bench``'s one-GPU cost model (25 recalls of 20 memories a second) in its own process.
Each agent's recalls arrive as a Poisson process of its own at ``--load`` times the capacity (together twice
that), the first agent's with ``--short`` seconds of timeout, the second's with ``--long``; by default they
differ in nothing else and share one batcher, ``--own-batchers`` gives the first a batch window of its own and
so a batcher (a queue) of its own. Every recall is checked as ``overload_bench`` checks them.

    python -m a0_reranker.bench.mixed_timeouts [--seconds 20] [--seed 1] [--own-batchers]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp

from ..service import runtime
from .cost_model_server import CostModelServer
from .overload_bench import (
    LATE_SLACK_S,
    ONE_GPU,
    SHED_REASONS,
    Recall,
    capacity_per_s,
    gpu_seconds,
    one_recall,
    overload_config,
    poisson_arrivals,
)

WARM_UP_S = 2.0  # goodput and the GPU's busy share are counted from here to the load's end


@dataclass(frozen=True)
class Agent:
    name: str
    timeout: float
    recalls: tuple[Recall, ...]

    def line(self) -> str:
        kinds = Counter(r.kind for r in self.recalls)
        reranked = kinds.get("reranked", 0) / max(len(self.recalls), 1)
        late = sum(r.seconds > self.timeout + LATE_SLACK_S for r in self.recalls)
        problems = sum(r.problem is not None for r in self.recalls)
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
        shed = [r.seconds for r in self.recalls if r.kind in SHED_REASONS]
        return (f"{self.name} ({self.timeout:g} s): {reranked:.0%} of {len(self.recalls)} recalls reranked "
                f"({outcomes}); shed recalls' stock result p50/p95 {_ms(shed, 0.5)}/{_ms(shed, 0.95)} ms; "
                f"late {late}, problems {problems}")


def _ms(seconds: Sequence[float], fraction: float) -> str:
    ordered = sorted(seconds)
    return f"{ordered[min(len(ordered) - 1, round(fraction * len(ordered)))] * 1000:.0f}" if ordered else "-"


async def _gpu_counters(session: aiohttp.ClientSession, url: str) -> tuple[int, int]:
    async with session.get(url + "/stats") as answer:
        body = await answer.json()
        return int(body["requests"]), int(body["pairs"])


async def measure(url: str, args: argparse.Namespace) -> list[str]:
    short = overload_config([url], args.short, True)
    short = short.replace(batch_window_ms=short.batch_window_ms + 1) if args.own_batchers else short
    long = overload_config([url], args.long, True)
    rate = args.load * capacity_per_s(ONE_GPU)
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(one_recall(c, args.seed, 0.0)(-1 - i, 0.0) for i, c in enumerate((short, long))))
        origin = time.monotonic()
        loads = [poisson_arrivals(rate, random.Random(args.seed * 2 + n), one_recall(config, args.seed * 2 + n, origin),
                                  seconds=args.seconds) for n, config in enumerate((short, long))]
        counted = asyncio.create_task(_counted(session, url, (WARM_UP_S, args.seconds)))
        short_recalls, long_recalls = await asyncio.gather(*loads)
        busy, recent = await counted
    agents = [Agent("short-timeout agent", args.short, tuple(short_recalls)),
              Agent("long-timeout agent", args.long, tuple(long_recalls))]
    window = args.seconds - WARM_UP_S
    goodput = sum(r.kind == "reranked" and WARM_UP_S <= r.arrived + r.seconds < args.seconds
                  for a in agents for r in a.recalls) / window
    return [*(a.line() for a in agents),
            f"capacity used: {goodput / capacity_per_s(ONE_GPU):.0%} reranked, GPU busy {busy / window:.0%}; "
            f"breakers {recent}"]


async def _counted(session: aiohttp.ClientSession, url: str, window: tuple[float, float]) -> tuple[float, object]:
    """The GPU's busy seconds over ``window`` (seconds from now), and the breakers at its end."""
    start = time.monotonic()
    await asyncio.sleep(window[0])
    before = await _gpu_counters(session, url)
    await asyncio.sleep(max(0.0, start + window[1] - time.monotonic()))
    after = await _gpu_counters(session, url)
    return gpu_seconds(ONE_GPU, after[0] - before[0], after[1] - before[1]), dict(runtime.statistics().breakers)


async def run(args: argparse.Namespace) -> list[str]:
    runtime.shutdown()
    try:
        with CostModelServer(ONE_GPU) as server:
            return await measure(server.url, args)
    finally:
        runtime.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=float, default=0.75, help="each agent's share of the capacity")
    parser.add_argument("--short", type=float, default=1.0)
    parser.add_argument("--long", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--own-batchers", action="store_true")
    args = parser.parse_args(argv)
    print(f"two agents, {args.load:g}x capacity each ({2 * args.load:g}x together), "
          f"{'own batchers' if args.own_batchers else 'one batcher'}, {args.seconds:g} s, seed {args.seed}")
    for line in asyncio.run(run(args)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
