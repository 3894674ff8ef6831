"""Overload: a healthy one-GPU server offered more than it can serve, with open-loop arrivals.

The server is a cost-model ``/rerank`` server in its own process: one forward pass at a time, 30 ms a
pass plus 0.5 ms a pair, so a recall of 20 memories takes 40 ms of its GPU and it can serve 25 recalls
a second. Recalls arrive as a Poisson process at a multiple of that capacity, whether or not earlier
ones were answered (as from many agents and sessions), each through ``rerank_pool`` as A0's recall
makes it. Every recall is checked: the server's order when reranked, exactly stock on a fallback, and
back within ``rerank_timeout`` + 100 ms.

Per run: goodput (recalls reranked per second, while the load runs, as a share of the capacity), the
GPU's busy share over the same window (the server's own counters), the outcomes, and how long the shed
recalls (``overload``, ``queue_full``) waited for their stock result. Once the load's recalls are all
back, 50 recalls at half the capacity show whether reranking resumes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import aiohttp

from ..core.config import RerankerConfig
from ..core.scores import RecallOutcome
from ..service import runtime
from ..service.runtime import rerank_pool
from .cost_model_server import CostModel, CostModelServer, cheap_score

ONE_GPU: Final = CostModel(request_ms=1.0, forward_ms=30.0, pair_ms=0.5)
DOCUMENTS: Final = 20
LIMIT: Final = 5
LATE_SLACK_S: Final = 0.1  # the contract: a result within rerank_timeout + 100 ms
RECOVERY_RECALLS: Final = 50
GOODPUT_GOAL: Final = 0.9  # of the capacity, in every run with shedding on
SHED_GOAL_MS: Final = 50.0  # a shed recall's stock result, at the median
SHED_REASONS: Final = frozenset({"overload", "queue_full"})
WORDS: Final = ("deploy", "database", "backup", "upgrade", "network", "billing", "login", "cache", "queue",
                "search", "vault", "token", "quota", "release", "alert", "disk", "replica", "schedule")


def capacity_per_s(cost: CostModel, documents: int = DOCUMENTS) -> float:
    """Recalls a second one GPU serves when each recall is its own forward pass."""
    return 1000.0 / (cost.forward_ms + cost.pair_ms * documents)


def gpu_seconds(cost: CostModel, requests: int, pairs: int) -> float:
    return (requests * cost.forward_ms + pairs * cost.pair_ms) / 1000.0


@dataclass(eq=False)
class Memory:
    page_content: str


def recall_case(seed: int, index: int) -> tuple[str, list[Memory]]:
    """A query (its own words, so no two recalls share a request) and 20 memories of varied overlap."""
    rng = random.Random(seed * 1_000_003 + index)
    query = f"recall {index} " + " ".join(rng.sample(WORDS, 4))
    pool = [Memory(f"memory {j} of {index}: " + " ".join(rng.sample(WORDS, rng.randint(1, 6))))
            for j in range(DOCUMENTS)]
    return query, pool


def violation(query: str, pool: Sequence[Memory], outcome: RecallOutcome[Memory]) -> str | None:
    where = {id(m): i for i, m in enumerate(pool)}
    got = [where.get(id(d), -1) for d in outcome.documents]
    if outcome.applied:
        scores = [cheap_score(query, m.page_content) for m in pool]
        expected = sorted(range(len(pool)), key=lambda i: (-scores[i], i))[:LIMIT]
        return None if got == expected else "reranked, but not in the server's order"
    return None if got == list(range(LIMIT)) else "a fallback was not exactly stock"


Fire = Callable[[int, float], Coroutine[Any, Any, "Recall"]]  # start recall ``index``, arrived at a time


@dataclass(frozen=True)
class Recall:
    arrived: float  # seconds since the load started
    seconds: float
    kind: str  # "reranked" or the fallback reason
    problem: str | None


@dataclass
class OverloadRun:
    """One run: a load multiple, a timeout, a seed, and whether shedding was on."""

    label: str
    load: float
    timeout: float
    seed: int
    shedding: bool
    seconds: float
    capacity_per_s: float
    offered: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    goodput_per_s: float = 0.0
    gpu_busy: float = 0.0
    shed_p50_ms: float | None = None
    shed_p95_ms: float | None = None
    reranked_p50_ms: float | None = None
    reranked_p95_ms: float | None = None
    queue_wait_p50_ms: float | None = None
    queue_wait_p95_ms: float | None = None
    late: int = 0
    problems: list[str] = field(default_factory=list)
    breakers: dict[str, str] = field(default_factory=dict)
    recovery_reranked: int = 0
    recovery_recalls: int = 0
    replicas: int = 1

    @property
    def goodput_ratio(self) -> float:
        return self.goodput_per_s / self.capacity_per_s

    @property
    def breaker_opened(self) -> bool:
        return self.outcomes.get("breaker_open", 0) > 0 or any(s != "closed" for s in self.breakers.values())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"goodput_ratio": round(self.goodput_ratio, 3), "breaker_opened": self.breaker_opened}


async def poisson_arrivals(rate: float, rng: random.Random, fire: Fire, *,
                           seconds: float = math.inf, count: int | None = None) -> list[Recall]:
    """Start ``fire(index, arrived)`` at Poisson times for ``seconds`` (or ``count`` arrivals), whatever
    came of earlier ones (an arrival the loop was late for starts at once: the schedule is kept)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    at = 0.0
    tasks: list[asyncio.Task[Recall]] = []
    while (at := at + rng.expovariate(rate)) < seconds and (count is None or len(tasks) < count):
        if (delay := start + at - loop.time()) > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(fire(len(tasks), at)))
    return list(await asyncio.gather(*tasks))


def one_recall(config: RerankerConfig, seed: int, origin: float) -> Fire:
    async def fire(index: int, arrived: float) -> Recall:
        query, pool = recall_case(seed, index)
        started = time.monotonic()
        outcome = await rerank_pool(query, pool, limit=LIMIT, config=config)
        seconds = time.monotonic() - started
        kind = "reranked" if outcome.applied else outcome.reason
        return Recall(started - origin, seconds, kind, violation(query, pool, outcome))

    return fire


async def _gpu_counters(session: aiohttp.ClientSession, url: str) -> tuple[int, int]:
    async with session.get(url + "/stats") as answer:
        body = await answer.json()
        return int(body["requests"]), int(body["pairs"])


def _ms(values: Sequence[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))] * 1000


def _tally(run: OverloadRun, recalls: Sequence[Recall], window: tuple[float, float]) -> None:
    """Outcomes, goodput within ``window`` (reranked recalls that came back in it), waits, problems."""
    run.offered = len(recalls)
    run.outcomes = dict(Counter(r.kind for r in recalls))
    done_in = [r for r in recalls if r.kind == "reranked" and window[0] <= r.arrived + r.seconds < window[1]]
    run.goodput_per_s = len(done_in) / (window[1] - window[0])
    shed = [r.seconds for r in recalls if r.kind in SHED_REASONS]
    reranked = [r.seconds for r in recalls if r.kind == "reranked"]
    run.shed_p50_ms, run.shed_p95_ms = _ms(shed, 0.5), _ms(shed, 0.95)
    run.reranked_p50_ms, run.reranked_p95_ms = _ms(reranked, 0.5), _ms(reranked, 0.95)
    run.late = sum(r.seconds > run.timeout + LATE_SLACK_S for r in recalls)
    run.problems = [f"recall {i}: {r.problem}" for i, r in enumerate(recalls) if r.problem]


async def measure(run: OverloadRun, urls: Sequence[str], cost: CostModel, warm_up_s: float = 2.0) -> OverloadRun:
    """One run against a fresh owner loop: warm up, then the load, then the recovery recalls."""
    config = overload_config(urls, run.timeout, run.shedding)
    fire = one_recall(config, run.seed, time.monotonic())
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(fire(-1 - i, 0.0) for i in range(4 * len(urls))))  # connections, first passes
        runtime.stats_recorder().reset()
        origin = time.monotonic()
        window = (warm_up_s, run.seconds)
        counters = asyncio.create_task(_counters_over(session, urls, window))
        recalls = await poisson_arrivals(run.load * run.capacity_per_s, random.Random(run.seed),
                                         one_recall(config, run.seed, origin), seconds=run.seconds)
        before, after = await counters
        _tally(run, recalls, window)
        busy = [gpu_seconds(cost, a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before, strict=True)]
        run.gpu_busy = sum(busy) / len(busy) / (window[1] - window[0])
        stats = runtime.statistics()
        run.breakers = dict(stats.breakers)
        run.queue_wait_p50_ms, run.queue_wait_p95_ms = stats.load.queue_wait_p50_ms, stats.load.queue_wait_p95_ms
        recovery = await poisson_arrivals(0.5 * run.capacity_per_s, random.Random(run.seed + 1),
                                          one_recall(config, run.seed + 7, origin), count=RECOVERY_RECALLS)
        run.recovery_recalls = len(recovery)
        run.recovery_reranked = sum(r.kind == "reranked" for r in recovery)
        run.problems += [f"recovery {i}: {r.problem}" for i, r in enumerate(recovery) if r.problem]
    return run


async def _counters_over(session: aiohttp.ClientSession, urls: Sequence[str], window: tuple[float, float]
                         ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Each server's counters at the window's start and end (seconds since now)."""
    start = time.monotonic()
    await asyncio.sleep(window[0])
    before = [await _gpu_counters(session, url) for url in urls]
    await asyncio.sleep(max(0.0, start + window[1] - time.monotonic()))
    return before, [await _gpu_counters(session, url) for url in urls]


def overload_config(urls: Sequence[str], timeout: float, shedding: bool) -> RerankerConfig:
    """The defaults a user gets, the ``/rerank`` API named (no detection), and the run's timeout."""
    return RerankerConfig(endpoint=",".join(urls), api="rerank", timeout=timeout, shed_overload=shedding)


async def run_one(load: float, timeout_s: float, seed: int, *, shedding: bool = True, seconds: float = 20.0,
                  replicas: int = 1, cost: CostModel = ONE_GPU,
                  ready: Callable[[], None] = lambda: None) -> OverloadRun:
    """One run against its own fresh servers (one process each) and owner loop; ``ready()`` once they serve."""
    label = (f"{load:g}x capacity, timeout {timeout_s:g} s, seed {seed}, shedding {'on' if shedding else 'off'}"
             + (f", {replicas} replicas" if replicas > 1 else ""))
    run = OverloadRun(label=label, load=load, timeout=timeout_s, seed=seed, shedding=shedding, seconds=seconds,
                      capacity_per_s=replicas * capacity_per_s(cost), replicas=replicas)
    runtime.shutdown()
    try:
        with contextlib.ExitStack() as stack:
            urls = [stack.enter_context(CostModelServer(cost)).url for _ in range(replicas)]
            ready()
            return await measure(run, urls, cost)
    finally:
        runtime.shutdown()


def goals_met(run: OverloadRun) -> bool:
    """The issue's acceptance for one run with shedding on."""
    shed_fast = run.shed_p50_ms is None or run.shed_p50_ms <= SHED_GOAL_MS
    return (run.goodput_ratio >= GOODPUT_GOAL and not run.breaker_opened and not run.problems and not run.late
            and shed_fast and run.recovery_reranked == run.recovery_recalls)


def summary(run: OverloadRun) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(run.outcomes.items()))
    return (f"{run.label}: goodput {run.goodput_per_s:.1f}/s = {run.goodput_ratio:.0%} of capacity, GPU busy "
            f"{run.gpu_busy:.0%}; {run.offered} offered: {outcomes}; shed waits p50/p95 {ms(run.shed_p50_ms)}/"
            f"{ms(run.shed_p95_ms)} ms; reranked p50/p95 {ms(run.reranked_p50_ms)}/{ms(run.reranked_p95_ms)} ms; "
            f"queue wait p50/p95 {ms(run.queue_wait_p50_ms)}/{ms(run.queue_wait_p95_ms)} ms; late {run.late}; "
            f"problems {len(run.problems)}; breakers {run.breakers}; recovery {run.recovery_reranked}/"
            f"{run.recovery_recalls} reranked")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=float, nargs="+", default=[1.2, 2.0, 5.0])
    parser.add_argument("--timeouts", type=float, nargs="+", default=[2.0, 10.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--shedding", choices=("on", "off", "both"), default="on")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.shedding]
    runs = []
    for timeout in args.timeouts:
        for load in args.loads:
            for seed in args.seeds:
                for shedding in modes:
                    run = asyncio.run(run_one(load, timeout, seed, shedding=shedding, seconds=args.seconds,
                                                 replicas=args.replicas))
                    print(summary(run), flush=True)
                    runs.append(run)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([r.as_dict() for r in runs], out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
