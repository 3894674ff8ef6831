"""How close to its deadline a caller is released, and what a call the open breaker skips costs: the tight
figures that the tests only bound loosely (``tests/support/deadlines.py``).

    python -m a0_reranker.bench.deadline_release                   # 5 rounds of 64 callers, timeout 0.3 s
    python -m a0_reranker.bench.deadline_release --rounds 10 --json release.json

A vLLM-style server in a child process holds every rerank request while told to, so a caller can only be
released by its deadline. In one run:

- ``lateness``: each caller's release after its deadline (its time less ``rerank_timeout``), ``callers``
  at once through the async API (on one loop) and through the blocking one (a thread each): p50, p95 and
  max. Goal: p95 under 100 ms, the acceptance bound "None within rerank_timeout + 100 ms".
- ``open breaker``: the median cost of a call the open breaker skips, beside the median cost of a call
  the same server answers, measured in the same run, and their ratio. Goal: under 1 (a skipped call sends
  nothing, so it costs less than an answered one).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

import aiohttp
from aiohttp import web

from ..core.config import RerankerConfig
from ..service import runtime
from .child_server import ChildProcessServer
from .vllm_answers import models_handler, overlap_rerank_answer

LATENESS_GOAL_MS: Final = 100.0  # the contract: None within rerank_timeout + 100 ms
HOLD_AT_MOST_S: Final = 60.0  # every hold ends by itself, so the server always stops
PATIENT_S: Final = 10.0  # the timeout of the calls that must be answered (warm-up, the answered side)
SHUT_BREAKER: Final[dict[str, Any]] = {"breaker_failures": 1000, "breaker_failure_rate": 1}


def build_app() -> web.Application:
    """``POST /control`` with ``{"hold": true}`` makes every later rerank wait (until the client hangs up);
    ``/control`` answers with the state, and how many reranks the server has received."""
    state = {"hold": False, "received": 0}

    async def rerank(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        state["received"] += 1
        if state["hold"]:
            await asyncio.sleep(HOLD_AT_MOST_S)  # cancelled as soon as the client hangs up
        return web.json_response(overlap_rerank_answer(body, "deadline"))

    async def control(request: web.Request) -> web.Response:
        if request.method == "POST":
            state["hold"] = bool((await request.json())["hold"])
        return web.json_response(state)

    app = web.Application()
    app.add_routes([web.post("/rerank", rerank), web.get("/v1/models", models_handler("deadline")),
                    web.route("*", "/control", control)])
    return app


@dataclass(frozen=True)
class ReleasePlan:
    timeout_s: float = 0.3  # rerank_timeout
    callers: int = 64  # callers at once, per round and API
    rounds: int = 5
    calls: int = 200  # calls timed on each side of the breaker


@dataclass(frozen=True)
class Spread:
    """Milliseconds: least, median, 95th percentile and most of one sample."""

    min_ms: float
    p50_ms: float
    p95_ms: float
    max_ms: float
    samples: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Spread:
        ordered = sorted(s * 1000 for s in seconds)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        return cls(round(ordered[0], 2), round(statistics.median(ordered), 2), round(p95, 2), round(ordered[-1], 2),
                   len(ordered))


@dataclass(frozen=True)
class ReleaseReport:
    timeout_s: float
    callers: int
    rounds: int
    async_lateness: Spread
    blocking_lateness: Spread
    skipped_call: Spread
    answered_call: Spread
    not_none: int  # callers of a held request that got a ranking anyway: must be 0
    skipped_sent: int  # requests the skipped calls sent: must be 0

    @property
    def skipped_to_answered(self) -> float:
        return self.skipped_call.p50_ms / self.answered_call.p50_ms if self.answered_call.p50_ms else 0.0

    @property
    def goals_met(self) -> bool:
        late = max(self.async_lateness.p95_ms, self.blocking_lateness.p95_ms)
        return late < LATENESS_GOAL_MS and self.skipped_to_answered < 1 and not self.not_none + self.skipped_sent

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"skipped_to_answered": round(self.skipped_to_answered, 3), "goals_met": self.goals_met}

    def summary(self) -> str:
        return "\n".join([
            f"rerank_timeout {self.timeout_s} s, {self.callers} callers at once, {self.rounds} rounds; "
            f"lateness after the deadline (goal: p95 under {LATENESS_GOAL_MS:.0f} ms):",
            f"  async     {_spread(self.async_lateness)}",
            f"  blocking  {_spread(self.blocking_lateness)}",
            f"a call the open breaker skips {_spread(self.skipped_call)}",
            f"a call the server answers     {_spread(self.answered_call)}",
            f"skipped / answered (medians): {self.skipped_to_answered:.3f} (goal: under 1); "
            f"rankings from a held server {self.not_none}, requests the skipped calls sent {self.skipped_sent}",
            "goals met" if self.goals_met else "GOALS MISSED",
        ])


def _spread(spread: Spread) -> str:
    return f"p50 {spread.p50_ms:.1f} ms, p95 {spread.p95_ms:.1f} ms, max {spread.max_ms:.1f} ms ({spread.samples})"


async def _hold(url: str, on: bool) -> None:
    async with aiohttp.ClientSession() as session, session.post(f"{url}/control", json={"hold": on}) as answer:
        answer.raise_for_status()


async def _received(url: str) -> int:
    """The rerank requests the server has received so far."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/control") as answer:
        return int((await answer.json())["received"])


def _recall(caller: int) -> tuple[str, list[str]]:
    return f"rotate backup key {caller}", [f"memory {d} about backup key rotation {caller}" for d in range(8)]


async def _timed_async(config: RerankerConfig, caller: int) -> tuple[object, float]:
    started = time.monotonic()
    ranking = await runtime.rerank_async(*_recall(caller), config=config)
    return ranking, time.monotonic() - started


def _timed_blocking(config: RerankerConfig, caller: int) -> tuple[object, float]:
    started = time.monotonic()
    ranking = runtime.rerank(*_recall(caller), config=config)
    return ranking, time.monotonic() - started


async def _held_rounds(config: RerankerConfig, callers: int, rounds: int) -> tuple[list[float], list[float], int]:
    """Lateness of every caller of a held server, async and blocking; and how many got a ranking."""
    late_async: list[float] = []
    late_blocking: list[float] = []
    rankings = 0
    loop = asyncio.get_running_loop()
    with concurrent.futures.ThreadPoolExecutor(max_workers=callers) as threads:
        for round_ in range(rounds):
            first = 2 * round_ * callers
            done = await asyncio.gather(*(_timed_async(config, first + i) for i in range(callers)))
            done += await asyncio.gather(*(loop.run_in_executor(threads, _timed_blocking, config, first + callers + i)
                                           for i in range(callers)))
            for index, (ranking, seconds) in enumerate(done):
                (late_async if index < callers else late_blocking).append(seconds - config.timeout)
                rankings += ranking is not None
    return late_async, late_blocking, rankings


async def _call_costs(config: RerankerConfig, calls: int, first: int, answered: bool) -> list[float]:
    costs = []
    for caller in range(first, first + calls):
        ranking, seconds = await _timed_async(config, caller)
        if (ranking is not None) != answered:
            raise RuntimeError(f"expected {'a ranking' if answered else 'None'}: {runtime.statistics().last_error}")
        costs.append(seconds)
    return costs


async def _open_breaker(config: RerankerConfig, url: str) -> RerankerConfig:
    """The endpoint's breaker opened by one held request, with a cooldown longer than the run."""
    opening = config.replace(breaker_failures=1, breaker_failure_rate=0.5, breaker_cooldown=3600)
    await _hold(url, True)
    await runtime.rerank_async(*_recall(-1), config=opening)
    for _ in range(1000):
        if runtime.statistics().breakers.get(url) == "open":
            return opening
        await asyncio.sleep(0.005)
    raise RuntimeError(f"the breaker did not open: {runtime.statistics()}")


async def measure(url: str, plan: ReleasePlan) -> ReleaseReport:
    config = RerankerConfig(endpoint=url, api="rerank", timeout=plan.timeout_s, max_queued_pairs=1_000_000,
                            **SHUT_BREAKER)
    answered = await _call_costs(config.replace(timeout=PATIENT_S), plan.calls, 0, answered=True)  # detects, too
    await _hold(url, True)
    late_async, late_blocking, rankings = await _held_rounds(config, plan.callers, plan.rounds)
    opened = await _open_breaker(config, url)
    sent = await _received(url)
    skipped = await _call_costs(opened, plan.calls, plan.calls, answered=False)
    skipped_sent = await _received(url) - sent
    await _hold(url, False)
    return ReleaseReport(plan.timeout_s, plan.callers, plan.rounds, Spread.of(late_async), Spread.of(late_blocking),
                         Spread.of(skipped), Spread.of(answered), rankings, skipped_sent)


async def run(plan: ReleasePlan) -> ReleaseReport:
    """One run against a fresh server (in a child process) and a fresh owner loop."""
    runtime.shutdown()
    try:
        with ChildProcessServer(build_app) as server:
            return await measure(server.url, plan)
    finally:
        runtime.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=ReleasePlan.timeout_s, help="rerank_timeout in seconds")
    parser.add_argument("--callers", type=int, default=ReleasePlan.callers, help="callers at once per round")
    parser.add_argument("--rounds", type=int, default=ReleasePlan.rounds, help="rounds of held requests")
    parser.add_argument("--calls", type=int, default=ReleasePlan.calls, help="calls timed each side of the breaker")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    report = asyncio.run(run(ReleasePlan(args.timeout, args.callers, args.rounds, args.calls)))
    print(report.summary())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report.as_dict(), out, indent=2)
    return 0 if report.goals_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
