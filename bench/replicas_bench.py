"""Replicas: what listing several servers buys once one GPU is saturated, and how a slow one is treated.

Each replica is a cost-model server (one GPU) in its own child process, serving a big model whose
pairs dominate the cost: 10 ms a forward pass plus 0.5 ms a pair. ``concurrency`` agents (32) recall
``documents`` memories (20) in a closed loop through the engine with the default settings, against
1, 2 ... N replicas and against N replicas of which one is 4x slower. Rounds alternate the sets, so
the drift of a shared machine hits all alike, and each set's figure is its median round. Each run
gets a fresh owner loop, so nothing the balancer learned carries over from the one before.

Per set: recalls/s and the ratio to one replica, latency, HTTP requests, and per replica its share
of the pairs (the engine's own ``statistics().replicas``) and how busy its GPU was (the server's own
counters: the time its one GPU spent in forward passes, over the run's wall time).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp

from ..service import runtime
from .batching_bench import batched_config, closed_loop, workload
from .cost_model_server import CostModel

BIG_MODEL: Final = CostModel(request_ms=1.0, forward_ms=10.0, pair_ms=0.5)
SLOWDOWN: Final = 4.0
GOAL_REPLICAS, GOAL_RATIO = 3, 2.5  # the acceptance: 3 replicas give at least 2.5x one


def slower(cost: CostModel, factor: float = SLOWDOWN) -> CostModel:
    """The same server ``factor`` times slower in everything it does."""
    return CostModel(request_ms=cost.request_ms * factor, forward_ms=cost.forward_ms * factor,
                     pair_ms=cost.pair_ms * factor)


@dataclass(frozen=True)
class ReplicaSetup:
    """One set of replicas to measure: a label and each member's cost model."""

    label: str
    costs: tuple[CostModel, ...]


def setups(replicas: int, cost: CostModel = BIG_MODEL) -> list[ReplicaSetup]:
    """1 ... ``replicas`` equal replicas, then (with two or more) ``replicas`` with the last one slower."""
    sets = [ReplicaSetup(f"{n} replica{'s' if n > 1 else ''}", (cost,) * n) for n in range(1, replicas + 1)]
    if replicas >= 2:
        sets.append(ReplicaSetup(f"{replicas} replicas, one {SLOWDOWN:g}x slower",
                                 (cost,) * (replicas - 1) + (slower(cost),)))
    return sets


@dataclass(frozen=True)
class ReplicaFigures:
    """One replica in one run: its share of the pairs as the engine counted them, and its GPU."""

    url: str
    slowdown: float
    share: float  # of the pairs the engine sent (statistics().replicas)
    pairs: int  # what the server itself scored
    requests: int
    gpu_busy: float  # fraction of the run's wall time its GPU spent in forward passes
    ms_per_pair: float | None  # the balancer's estimate at the end of the run


@dataclass(frozen=True)
class SetRun:
    """One set measured once."""

    label: str
    round: int
    recalls: int
    seconds: float
    p50_ms: float
    p95_ms: float
    http_requests: int
    pairs_scored: int
    hedges: int
    failovers: int
    client_cpu: float  # this process's CPU seconds per wall second during the run
    client_cpu_wait: float | None  # seconds its threads waited for a CPU, per wall second (Linux)
    load_average: float  # the machine's, over the last minute, at the end of the run
    replicas: tuple[ReplicaFigures, ...]

    @property
    def throughput(self) -> float:
        return self.recalls / self.seconds if self.seconds else 0.0


@dataclass
class ReplicaBenchResult:
    concurrency: int
    documents: int
    cost_model: CostModel
    runs: list[SetRun] = field(default_factory=list)

    def labels(self) -> list[str]:
        return list(dict.fromkeys(run.label for run in self.runs))

    def median_run(self, label: str) -> SetRun:
        """The round whose throughput is the median of the set's rounds (the lower one of an even count)."""
        ranked = sorted((r for r in self.runs if r.label == label), key=lambda r: r.throughput)
        return ranked[(len(ranked) - 1) // 2]

    def ratio(self, label: str) -> float:
        base = self.median_run(self.labels()[0]).throughput
        return self.median_run(label).throughput / base if base else 0.0

    @property
    def goal_ratio(self) -> float | None:
        """The ratio of 3 replicas to one, when 3 equal replicas were measured."""
        label = next((x for x in self.labels() if x == f"{GOAL_REPLICAS} replicas"), None)
        return None if label is None else self.ratio(label)

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for label in self.labels():
            run = self.median_run(label)
            rows.append({
                "set": label, "replicas": len(run.replicas), "recalls_per_s": round(run.throughput, 1),
                "ratio_to_one": round(self.ratio(label), 2),
                "rounds": [round(r.throughput, 1) for r in self.runs if r.label == label],
                "p50_ms": round(run.p50_ms, 1), "p95_ms": round(run.p95_ms, 1),
                "http_requests": run.http_requests,
                "pairs_per_request": round(run.pairs_scored / run.http_requests, 1) if run.http_requests else None,
                "hedges": run.hedges, "client_cpu": round(run.client_cpu, 2),
                "client_cpu_wait": rounded(run.client_cpu_wait), "load_average": round(run.load_average, 1),
                "shares": [round(r.share, 3) for r in run.replicas],
                "gpu_busy": [round(r.gpu_busy, 2) for r in run.replicas],
                "slowdowns": [r.slowdown for r in run.replicas],
            })
        return rows

    def as_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "documents": self.documents, "cost_model": asdict(self.cost_model),
                "slowdown": SLOWDOWN, "goal": {"replicas": GOAL_REPLICAS, "ratio": GOAL_RATIO,
                                               "measured": rounded(self.goal_ratio)},
                "rows": self.rows(), "runs": [asdict(r) | {"throughput": r.throughput} for r in self.runs]}


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def expected_share(slowdowns: Sequence[float], index: int) -> float:
    """The share of pairs a replica gets when each is given work in proportion to its speed."""
    speeds = [1 / s for s in slowdowns]
    return speeds[index] / sum(speeds)


async def _server_counts(session: aiohttp.ClientSession, urls: Sequence[str]) -> list[tuple[int, int]]:
    counts = []
    for url in urls:
        async with session.get(url + "/stats") as answer:
            body = await answer.json()
        counts.append((int(body["requests"]), int(body["pairs"])))
    return counts


def cpu_wait_s() -> float | None:
    """How long this process's threads have waited for a CPU so far (``/proc``'s schedstat), or None
    where that is not available: on a loaded machine it is what stretches the client's turnarounds."""
    try:
        return sum(int((task / "schedstat").read_text().split()[1]) for task in Path("/proc/self/task").iterdir()) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _gpu_seconds(cost: CostModel, requests: int, pairs: int) -> float:
    return (requests * cost.forward_ms + pairs * cost.pair_ms) / 1000


async def measure_set(setup: ReplicaSetup, urls: Sequence[str], *, round_: int, concurrency: int, documents: int,
                      recalls: int, session: aiohttp.ClientSession) -> SetRun:
    """One set, once: a fresh owner loop, a warm-up (connections, detection, the balancer's first
    estimates), then ``recalls`` recalls by ``concurrency`` agents."""
    runtime.shutdown()
    config = batched_config(",".join(urls))

    async def recall(index: int) -> None:
        query, docs = workload(index, documents)
        if await runtime.rerank_async(query, docs, config=config) is None:
            raise RuntimeError(f"a recall fell back against {setup.label}; see the statistics")

    await closed_loop(concurrency, 2 * concurrency, recall)
    runtime.stats_recorder().reset()
    before = await _server_counts(session, urls)
    started, cpu_started, wait_started = time.perf_counter(), time.process_time(), cpu_wait_s()
    latencies = await closed_loop(concurrency, recalls, recall)
    seconds, cpu, wait = time.perf_counter() - started, time.process_time() - cpu_started, cpu_wait_s()
    stats = runtime.statistics()
    after = await _server_counts(session, urls)
    runtime.shutdown()
    engine = {r.url: r for r in stats.replicas}
    figures = tuple(
        ReplicaFigures(url=url, slowdown=cost.forward_ms / setup.costs[0].forward_ms,
                       share=engine[url].share if url in engine else 0.0, pairs=a[1] - b[1], requests=a[0] - b[0],
                       gpu_busy=_gpu_seconds(cost, a[0] - b[0], a[1] - b[1]) / seconds,
                       ms_per_pair=engine[url].ms_per_pair if url in engine else None)
        for url, cost, a, b in zip(urls, setup.costs, after, before, strict=True))
    quantiles = statistics.quantiles(latencies, n=20, method="inclusive")
    return SetRun(setup.label, round_, recalls, seconds, statistics.median(latencies), quantiles[18],
                  stats.http_requests, stats.pairs_scored, stats.hedges, stats.failovers, cpu / seconds,
                  None if wait is None or wait_started is None else (wait - wait_started) / seconds,
                  os.getloadavg()[0], figures)


async def run_replica_benchmark(
    servers: Mapping[CostModel, Sequence[str]], replica_sets: Sequence[ReplicaSetup], *, concurrency: int = 32,
    documents: int = 20, recalls: int = 600, rounds: int = 2, progress: Callable[[str], None] | None = None,
) -> ReplicaBenchResult:
    """Every set once per round, in turn. ``servers`` maps a cost model to running servers' URLs,
    as many as the largest set uses of it."""
    result = ReplicaBenchResult(concurrency, documents, replica_sets[0].costs[0])
    async with aiohttp.ClientSession() as session:
        for round_ in range(1, rounds + 1):
            for setup in replica_sets:
                if progress:
                    progress(f"round {round_}: {setup.label}")
                urls = _urls_for(setup, servers)
                result.runs.append(await measure_set(setup, urls, round_=round_, concurrency=concurrency,
                                                     documents=documents, recalls=recalls, session=session))
    return result


def _urls_for(setup: ReplicaSetup, servers: Mapping[CostModel, Sequence[str]]) -> list[str]:
    used: dict[CostModel, int] = {}
    urls = []
    for cost in setup.costs:
        urls.append(servers[cost][used.get(cost, 0)])
        used[cost] = used.get(cost, 0) + 1
    return urls


def servers_needed(replica_sets: Sequence[ReplicaSetup]) -> dict[CostModel, int]:
    """How many servers of each cost model the sets need at most."""
    needed: dict[CostModel, int] = {}
    for setup in replica_sets:
        for cost in set(setup.costs):
            needed[cost] = max(needed.get(cost, 0), setup.costs.count(cost))
    return needed

