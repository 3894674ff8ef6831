"""Naive (one HTTP request per recall, as the predecessor) against the micro-batcher, side by side.

At each concurrency ``c``, ``c`` agents recall in a closed loop (each starts its next recall when the
last one returns) until the level's recalls are done. Both modes send the same bytes (the Qwen3
``/score`` dialect) to the same server; only the scheduling differs. Results are ratios from one
run, so the noise of a shared machine affects both sides alike.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field

import aiohttp

from ..core.config import RerankerConfig
from ..core.dialects import ScoreBatch
from ..core.dialects.catalog import Qwen3ScoreDialect
from ..service import runtime

DEFAULT_CONCURRENCY = (1, 4, 16, 64)
TOPICS = ("deploy", "database", "backup", "upgrade", "network", "billing", "login", "cache", "queue", "search")


@dataclass(frozen=True)
class Level:
    mode: str
    concurrency: int
    recalls: int
    seconds: float
    http_requests: int
    p50_ms: float
    p95_ms: float

    @property
    def throughput(self) -> float:
        return self.recalls / self.seconds if self.seconds else 0.0


@dataclass
class BenchResult:
    endpoint: str
    documents: int
    levels: list[Level] = field(default_factory=list)

    def pair(self, concurrency: int) -> tuple[Level, Level]:
        naive = next(x for x in self.levels if x.mode == "naive" and x.concurrency == concurrency)
        ours = next(x for x in self.levels if x.mode == "batched" and x.concurrency == concurrency)
        return naive, ours

    def rows(self) -> list[dict[str, float]]:
        rows = []
        for c in sorted({x.concurrency for x in self.levels}):
            naive, ours = self.pair(c)
            rows.append({
                "concurrency": c,
                "naive_recalls_per_s": round(naive.throughput, 1),
                "batched_recalls_per_s": round(ours.throughput, 1),
                "throughput_ratio": round(ours.throughput / naive.throughput, 2) if naive.throughput else 0.0,
                "naive_p50_ms": round(naive.p50_ms, 2), "batched_p50_ms": round(ours.p50_ms, 2),
                "naive_p95_ms": round(naive.p95_ms, 2), "batched_p95_ms": round(ours.p95_ms, 2),
                "p50_added_ms": round(ours.p50_ms - naive.p50_ms, 2),
                "naive_requests": naive.http_requests, "batched_requests": ours.http_requests,
            })
        return rows

    def as_dict(self) -> dict[str, object]:
        return {"endpoint": self.endpoint, "documents": self.documents, "rows": self.rows(),
                "levels": [asdict(x) | {"throughput": x.throughput} for x in self.levels]}

    def table(self) -> str:
        head = (f"{'conc':>5} {'naive rec/s':>12} {'batched rec/s':>14} {'ratio':>6} {'naive p50/p95 ms':>17} "
                f"{'batched p50/p95 ms':>19} {'HTTP naive':>11} {'HTTP batched':>13}")
        lines = [head]
        for r in self.rows():
            lines.append(
                f"{r['concurrency']:>5} {r['naive_recalls_per_s']:>12.1f} {r['batched_recalls_per_s']:>14.1f} "
                f"{r['throughput_ratio']:>5.2f}x {r['naive_p50_ms']:>8.2f}/{r['naive_p95_ms']:<8.2f} "
                f"{r['batched_p50_ms']:>9.2f}/{r['batched_p95_ms']:<9.2f} {r['naive_requests']:>11} "
                f"{r['batched_requests']:>13}"
            )
        return "\n".join(lines)


def workload(index: int, documents: int) -> tuple[str, list[str]]:
    """A recall: a query about one topic, and candidate memories of which a few share its words."""
    topic = TOPICS[index % len(TOPICS)]
    query = f"agent {index} asks what changed in the {topic} setup last week"
    docs = [f"memory {j}: notes on the {TOPICS[(index + j) % len(TOPICS)]} setup, item {j}" for j in range(documents)]
    return query, docs


def batched_config(endpoint: str, **overrides: object) -> RerankerConfig:
    settings: dict[str, object] = {"endpoint": endpoint, "api": "qwen3_score", "timeout": 60.0}
    settings.update(overrides)
    return RerankerConfig(**settings)  # type: ignore[arg-type]


async def closed_loop(concurrency: int, total: int, one_recall: Callable[[int], Awaitable[None]]) -> list[float]:
    """``concurrency`` agents, each starting its next recall when its last one returns, until ``total``
    recalls are done; each recall's latency in ms."""
    latencies: list[float] = []
    counter = iter(range(total))

    async def agent() -> None:
        for index in counter:
            started = time.perf_counter()
            await one_recall(index)
            latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(agent() for _ in range(concurrency)))
    return latencies


async def _server_requests(session: aiohttp.ClientSession, endpoint: str) -> int:
    try:
        async with session.get(endpoint + "/stats") as response:
            return int((await response.json())["requests"]) if response.status == 200 else -1
    except (aiohttp.ClientError, ValueError, KeyError):
        return -1


async def run_level(
    mode: str, concurrency: int, total: int, endpoint: str, documents: int, config: RerankerConfig,
    session: aiohttp.ClientSession,
) -> Level:
    dialect = Qwen3ScoreDialect(config.instruction)

    async def naive(index: int) -> None:
        query, docs = workload(index, documents)
        request = dialect.build(ScoreBatch.single(query, docs), "")
        async with session.post(endpoint + request.path, json=request.body) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"naive request failed with HTTP {response.status}")

    async def batched(index: int) -> None:
        query, docs = workload(index, documents)
        if await runtime.rerank_async(query, docs, config=config) is None:
            raise RuntimeError("a batched rerank fell back; see the statistics")

    recall = naive if mode == "naive" else batched
    await closed_loop(min(concurrency, 4), min(total, 8), recall)  # warm-up: connections, detection
    before = await _server_requests(session, endpoint)
    started = time.perf_counter()
    latencies = await closed_loop(concurrency, total, recall)
    seconds = time.perf_counter() - started
    after = await _server_requests(session, endpoint)
    quantiles = statistics.quantiles(latencies, n=20, method="inclusive")
    return Level(mode, concurrency, total, seconds, after - before if before >= 0 else -1,
                 statistics.median(latencies), quantiles[18])


async def run_benchmark(
    endpoint: str,
    *,
    concurrencies: Sequence[int] = DEFAULT_CONCURRENCY,
    documents: int = 20,
    recalls: Callable[[int], int] = lambda c: max(200, 8 * c),
    config: RerankerConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Measure both modes at each concurrency, alternating so that drift hits both alike."""
    config = config or batched_config(endpoint)
    result = BenchResult(endpoint=endpoint, documents=documents)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for concurrency in concurrencies:
            for mode in ("naive", "batched"):
                if progress:
                    progress(f"{mode} at concurrency {concurrency}")
                level = await run_level(mode, concurrency, recalls(concurrency), endpoint, documents, config, session)
                result.levels.append(level)
    return result
