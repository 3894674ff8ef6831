"""Past a TEI's permits: a server with room for fewer of our texts than we send at once, every recall checked.

    python -m a0_reranker.bench.load_permits                    # 3,000 recalls at concurrency 24 per permit level
    python -m a0_reranker.bench.load_permits --recalls 10000 --concurrency 64 --json permits.json

TEI's ``--max-concurrent-requests`` (512 by default) counts texts, not requests: each text of a rerank
holds a permit through its pass, and a request some text of which finds none free is answered 429
``{"error": "Model is overloaded", "error_type": "Overloaded"}``, once the texts that got one are through.
A server started with fewer, or shared with other clients, meets more of our texts than it has permits.

The server here speaks TEI's ``GET /info`` and ``POST /rerank`` (word-overlap scores, so every order can
be checked) in a child process; a request's texts hold their permits for 4 ms plus 0.5 ms a text. Our peak
is 128 texts at once: four requests (``rerank_max_concurrency``) of at most 32 (TEI's client batch limit,
which ``/info`` tells us). Each run gives the server permits for all of them, half and a quarter, and
``concurrency`` agents recall through ``rerank_pool`` in a closed loop, as ``load_flaky`` runs them (pools of
1 to 30 memories, queries shared by several recalls), with a 2 s ``rerank_timeout``.

The goals: at least 99% of the recalls with something to rerank are reranked in every run, none late, no
result breaks the contract; and a run with a share of the peak in permits serves at least 90% of that share
of the recalls a second the run with permits for all serves, side by side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

import aiohttp
from aiohttp import web

from ..demo import word_overlap_score
from ..service import runtime
from .child_server import ChildProcessServer
from .load_flaky import LoadPlan, LoadReport, load_config, run_load

PEAK_TEXTS: Final = 4 * 32  # rerank_max_concurrency's default times TEI's max_client_batch_size
RERANKED_GOAL: Final = 0.99
PACE_GOAL: Final = 0.9  # of the permits' share of our peak, against the run with room for all


@dataclass(frozen=True)
class Permits:
    total: int
    base_ms: float = 4.0
    text_ms: float = 0.5


def build_app(permits: Permits) -> web.Application:
    free = permits.total
    counts = {"received": 0, "answered": 0, "overloaded": 0}

    async def info(_: web.Request) -> web.Response:
        return web.json_response({"model_id": "load", "model_type": {"reranker": {"id2label": {"0": "LABEL_0"}}},
                                  "max_concurrent_requests": permits.total, "max_client_batch_size": 32})

    async def rerank(request: web.Request) -> web.Response:
        nonlocal free
        body: dict[str, Any] = await request.json()
        texts: list[str] = body["texts"]
        counts["received"] += 1
        got = min(free, len(texts))  # each text tries for a permit, without waiting
        free -= got
        try:
            if got:  # the texts that got one go through the model before the request is answered
                await asyncio.sleep((permits.base_ms + permits.text_ms * got) / 1000)
        finally:
            free += got
        if got < len(texts):
            counts["overloaded"] += 1
            return web.json_response({"error": "Model is overloaded", "error_type": "Overloaded"}, status=429)
        counts["answered"] += 1
        scores = [word_overlap_score(body["query"], text) for text in texts]
        ranked = sorted(range(len(texts)), key=lambda i: -scores[i])
        return web.json_response([{"index": i, "score": scores[i]} for i in ranked])

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(counts)

    app = web.Application()
    app.router.add_get("/info", info)
    app.router.add_post("/rerank", rerank)
    app.router.add_get("/stats", stats)
    return app


class PermitServer(ChildProcessServer):
    """Context manager: the TEI-like server in a child process; ``url`` is its base URL."""

    def __init__(self, permits: Permits) -> None:
        super().__init__(build_app, permits)

    async def counts(self) -> dict[str, int]:
        async with aiohttp.ClientSession() as session, session.get(f"{self.url}/stats") as answer:
            return dict(await answer.json())

    async def requests_served(self) -> int:
        return (await self.counts())["received"]


@dataclass
class PermitsRun:
    permits: int
    load: LoadReport
    overloaded: int  # the server's 429s

    def goals(self, pace_of_all: float) -> tuple[bool, float]:
        """Whether the run met its goals, and its pace as a share of the run with room for all."""
        load = self.load
        pace = load.throughput / pace_of_all if pace_of_all else 0.0
        share = min(self.permits, PEAK_TEXTS) / PEAK_TEXTS
        met = (load.reranked_share >= RERANKED_GOAL and not load.late_recalls and not load.violations
               and not load.exceptions and pace >= PACE_GOAL * share)
        return met, pace


async def run_permits(plan: LoadPlan, permits: int) -> PermitsRun:
    runtime.shutdown()
    with PermitServer(Permits(total=permits)) as server:
        config = load_config(server.url, timeout=plan.timeout)
        label = f"permits for {permits} of our peak {PEAK_TEXTS} texts, concurrency {plan.concurrency}"
        before = (await server.counts())["overloaded"]
        report = await run_load(label, plan, config, server.requests_served)
        overloaded = (await server.counts())["overloaded"] - before
    runtime.shutdown()
    return PermitsRun(permits, report, overloaded)


def pace_of_all(runs: Sequence[PermitsRun]) -> float:
    """Recalls a second with permits for all of our peak: what the other runs' pace is a share of."""
    return max((r.load.throughput for r in runs if r.permits >= PEAK_TEXTS), default=0.0)


def table(runs: Sequence[PermitsRun], pace_of_all: float) -> str:
    lines = ["| permits for | reranked | recalls/s | pace vs room for all | 429s per recall | late | goal |",
             "|---|---|---|---|---|---|---|"]
    for run in runs:
        met, pace = run.goals(pace_of_all)
        lines.append(f"| {run.permits} of {PEAK_TEXTS} | {run.load.reranked_share:.1%} | "
                     f"{run.load.throughput:.0f} | {pace:.2f} | {run.overloaded / run.load.recalls:.2f} | "
                     f"{run.load.late_recalls} | {'met' if met else 'MISSED'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recalls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=24)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    plan = LoadPlan(recalls=args.recalls, concurrency=args.concurrency, warmup=args.warmup, timeout=2.0)
    runs = []
    for permits in (PEAK_TEXTS, PEAK_TEXTS // 2, PEAK_TEXTS // 4):
        run = asyncio.run(run_permits(plan, permits))
        print(run.load.summary(), f"\nthe server's 429s: {run.overloaded}", flush=True)
        runs.append(run)
    pace = pace_of_all(runs)
    print(table(runs, pace))
    met = [run.goals(pace)[0] for run in runs]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([{"permits": r.permits, "overloaded": r.overloaded, "goal_met": goal, **r.load.as_dict()}
                       for r, goal in zip(runs, met, strict=True)] + [{"plan": asdict(plan)}], out, indent=2)
    return 0 if all(met) else 1


if __name__ == "__main__":
    raise SystemExit(main())
