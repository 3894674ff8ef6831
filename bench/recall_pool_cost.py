"""What the reranked pool adds to one recall, measured in the A0 stand-in, variants side by side.

    python -m a0_reranker.bench.recall_pool_cost                          # 300 memories, 400 recalls each
    python -m a0_reranker.bench.recall_pool_cost --memory-api v1.7 --json pool-cost.json

A recall (A0's ``_50_recall_memories``) runs two searches: memories (12 at 0.7) and solutions (8 at 0.7).
Each recall is timed in three variants, interleaved recall by recall (the order rotates) so that the
noise of a shared machine hits them alike:

- ``stock``: A0's two calls as A0 makes them, outside the recall scope (the wrapper passes them through);
- ``plugin``: the same two calls inside the recall scope, with the reranker's circuit breaker open so
  that the rerank itself costs nothing: what remains is what the plugin adds on top of the reranker's
  own latency (its settings, A0's own call, the pool search, the merge and the bookkeeping);
- ``plugin_without_pool``: the same with settings that ask for no wider pool (``rerank_candidates`` 1,
  ``rerank_pool_threshold`` 1), so no second search: ``plugin`` minus this is the pool search itself;
- ``one_scored_search`` (newer memory API only): one ``search_similarity_threshold_with_scores`` per
  search at the pool's limit and threshold, A0's answer derived from the scores: the alternative the
  plugin does not take, for comparison.

Needs the repository's ``tests/`` (the A0 stand-in), so it runs from a checkout only.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "usr.plugins.a0_reranker"
SEARCHES = ((12, "area == 'main' or area == 'fragments'"), (8, "area == 'solutions'"))  # (limit, filter)
THRESHOLD = 0.7
TOPIC = [f"topic{i}" for i in range(8)]
FILLER = 16  # words of its own per memory: a few memories per search pass A0's 0.7, most do not


@dataclass(frozen=True)
class Result:
    variant: str
    recalls: int
    median_ms: float
    mean_ms: float
    ratio_to_stock: float  # of the medians, measured in the same run
    added_ms: float  # median minus stock's median


@dataclass(frozen=True)
class Report:
    memory_api: str
    memories: int
    returned_per_recall: float  # what A0's two searches return together
    mean_pool_size: float  # of the searches that found something (the others ask for no pool)
    pool_search_ms: float  # plugin minus plugin_without_pool: the pool search's own cost per recall
    results: list[Result]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--recalls", type=int, default=400)
    parser.add_argument("--memory-api", choices=("newer", "v1.7"), default="newer")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    args = parser.parse_args(argv)
    with standin(args.memory_api):
        report = asyncio.run(measure(args.memories, args.recalls, args.memory_api, random.Random(args.seed)))
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return 0


@contextmanager
def standin(memory_api: str) -> Any:
    """An A0 stand-in root with the plugin linked in, imported as A0 imports it."""
    sys.path.insert(0, str(REPO / "tests"))
    layout = importlib.import_module("support.a0_layout")
    os.environ["A0_STANDIN_MEMORY_API"] = memory_api
    with tempfile.TemporaryDirectory(prefix="a0r-pool-cost-") as folder:
        root = layout.build_overlay_root(Path(folder) / "a0")
        sys.path.insert(0, str(root))
        with importlib.import_module("helpers.standin").use_root(root):
            try:
                yield root
            finally:
                importlib.import_module(f"{PLUGIN}.service.runtime").shutdown()


async def measure(memories: int, recalls: int, memory_api: str, rng: random.Random) -> Report:
    agent, lean, memory = await seeded_agents(memories, rng)
    queries = [query_text(rng) for _ in range(recalls)]
    variants: dict[str, Callable[[str], Awaitable[int]]] = {
        "stock": lambda q: stock_recall(memory, q),
        "plugin": lambda q: plugin_recall(agent, memory, q),
        "plugin_without_pool": lambda q: plugin_recall(lean, memory, q),
    }
    if memory_api == "newer":
        variants["one_scored_search"] = lambda q: scored_recall(memory, q)
    for opener in (agent, lean):  # opens the breaker: the rerank costs nothing from here on
        await plugin_recall(opener, memory, queries[0])
    timings = await timed(variants, queries)
    returned = sum([await stock_recall(memory, q) for q in queries[:50]]) / 50
    runtime = importlib.import_module(f"{PLUGIN}.service.runtime")
    runtime.stats_recorder().reset()
    for query in queries[:50]:
        await plugin_recall(agent, memory, query)
    pool = runtime.statistics().pool
    base = statistics.median(timings["stock"])
    results = [Result(name, len(values), round(statistics.median(values), 3), round(statistics.mean(values), 3),
                      round(statistics.median(values) / base, 2), round(statistics.median(values) - base, 3))
               for name, values in timings.items()]
    pool_ms = statistics.median(timings["plugin"]) - statistics.median(timings["plugin_without_pool"])
    return Report(memory_api, memories, returned, round(pool.mean_size or 0.0, 1), round(pool_ms, 3), results)


async def timed(variants: dict[str, Callable[[str], Awaitable[int]]], queries: list[str]) -> dict[str, list[float]]:
    """Milliseconds per recall and variant; each recall runs every variant, in a rotating order."""
    timings: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for i, query in enumerate(queries):
        for name in names[i % len(names):] + names[: i % len(names)]:
            started = time.perf_counter()
            await variants[name](query)
            timings[name].append((time.perf_counter() - started) * 1000)
    return timings


async def seeded_agents(count: int, rng: random.Random) -> tuple[Any, Any, Any]:
    """Two agents sharing one memory, their reranker at a closed port (the breaker opens after one
    failure): one with the default pool, one whose settings ask for none."""
    plugins = importlib.import_module("helpers.plugins")
    dead = {"rerank_endpoint": f"http://127.0.0.1:{closed_port()}", "rerank_timeout": 1,
            "rerank_breaker_failures": 1, "rerank_breaker_cooldown": 3600, "rerank_max_retries": 0}
    plugins.save_plugin_config("a0_reranker", "", "agent0", dead)
    plugins.save_plugin_config("a0_reranker", "", "lean", {**dead, "rerank_candidates": 1, "rerank_pool_threshold": 1})
    agent_module = importlib.import_module("agent")
    agent, lean = (agent_module.AgentContext(agent_module.AgentConfig(profile=p)).agent0 for p in ("agent0", "lean"))
    memory = await importlib.import_module("plugins._memory.helpers.memory").Memory.get(agent)
    for i in range(count):
        area = ("main", "fragments", "solutions")[i % 3]
        on_topic = min(len(TOPIC), int(rng.expovariate(0.7)))  # most memories are about something else
        words = rng.sample(TOPIC, on_topic) + [f"w{rng.randrange(5000)}" for _ in range(FILLER)]
        await memory.insert_text(" ".join(words), {"area": area})
    return agent, lean, memory


def query_text(rng: random.Random) -> str:
    """A0's recall query shape: the message, then the history (short here, so some memories pass 0.7)."""
    message = " ".join(rng.sample(TOPIC, 6))
    history = f'user: {{"user_message": "{message}"}}'
    return f"{history}\n\n{history}"


async def stock_recall(memory: Any, query: str) -> int:
    found = 0
    for limit, where in SEARCHES:
        found += len(await memory.search_similarity_threshold(query=query, limit=limit, threshold=THRESHOLD,
                                                              filter=where))
    return found


async def plugin_recall(agent: Any, memory: Any, query: str) -> int:
    scope = importlib.import_module(f"{PLUGIN}.a0_hooks.recall_entry")
    scope.begin(agent, "recall")
    try:
        return await stock_recall(memory, query)
    finally:
        scope.end()


async def scored_recall(memory: Any, query: str) -> int:
    """One scored search per A0 search: the pool, and A0's answer cut from it by score."""
    config = importlib.import_module(f"{PLUGIN}.core.config").RerankerConfig()
    found = 0
    for limit, where in SEARCHES:
        pairs = await memory.search_similarity_threshold_with_scores(
            query, max(limit, config.candidates), config.pool_threshold, where)
        found += len([doc for doc, score in pairs if score >= THRESHOLD][:limit])
    return found


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def render(report: Report) -> str:
    lines = [f"One recall's cost in the A0 stand-in ({report.memory_api} memory API, {report.memories} memories; "
             f"A0 returns {report.returned_per_recall:.1f} per recall, mean pool {report.mean_pool_size:.1f})",
             f"{'variant':<22}{'recalls':>8}{'median ms':>11}{'mean ms':>9}{'x stock':>9}{'+ms':>8}"]
    lines += [f"{r.variant:<22}{r.recalls:>8}{r.median_ms:>11.3f}{r.mean_ms:>9.3f}{r.ratio_to_stock:>9.2f}"
              f"{r.added_ms:>8.3f}" for r in report.results]
    lines.append(f"the pool search itself: {report.pool_search_ms:.3f} ms per recall (plugin - plugin_without_pool)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
