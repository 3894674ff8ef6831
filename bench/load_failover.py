"""Failover under load: three replicas, one killed a third of the way through, every recall checked.

    python -m a0_reranker.bench.load_failover                       # 1,200 recalls at concurrency 24
    python -m a0_reranker.bench.load_failover --recalls 5000 --concurrency 64 --json failover.json

Three healthy vLLM-style servers (``load_flaky_server`` without faults), each in a child process, are
listed in ``rerank_endpoint`` as replicas of one model. ``concurrency`` agents recall in a closed loop
through ``rerank_pool`` with the default settings and a 1 s ``rerank_timeout``, as ``load_flaky``
runs them. When a third of the recalls are back, the first replica is killed (SIGKILL: the system
closes its sockets, requests in flight on them fail, and later connections are refused). Every
recall is checked as in ``load_flaky``: the server's order when reranked, exactly stock (the same
objects in the same order) when not, and back within ``rerank_timeout`` + 100 ms.

The goals: at least 99% of the recalls with something to rerank are reranked, none is late, no
result breaks the contract, and the dead replica is ejected (its breaker opens).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from ..service import runtime
from .load_flaky import LoadPlan, LoadReport, load_config, run_load
from .load_flaky_server import Flakiness, FlakyServer

HEALTHY: Final = Flakiness(error_rate=0.0, hang_rate=0.0)
GOAL: Final = 0.99


@dataclass(frozen=True)
class FailoverPlan:
    recalls: int = 1200
    concurrency: int = 24
    warmup: int = 200
    replicas: int = 3
    kill_after: float = 1 / 3  # of the recalls back when the first replica is killed
    timeout: float = 1.0


@dataclass
class FailoverReport:
    load: LoadReport
    killed: str
    killed_after: int  # recalls back when it was killed (-1: never)
    failovers: int
    replicas: list[dict[str, Any]] = field(default_factory=list)

    @property
    def goal_met(self) -> bool:
        load = self.load
        return (load.reranked_share >= GOAL and not load.late_recalls and not load.violations
                and not load.exceptions and self.killed_after >= 0)

    def as_dict(self) -> dict[str, Any]:
        return {"killed": self.killed, "killed_after": self.killed_after, "failovers": self.failovers,
                "replicas": self.replicas, "goal": GOAL, "goal_met": self.goal_met, **self.load.as_dict()}

    def summary(self) -> str:
        shares = ", ".join(f"{r['url']} {r['share']:.1%} ({r['breaker']})" for r in self.replicas)
        return "\n".join([self.load.summary(),
                          f"killed {self.killed} after {self.killed_after} recalls; {self.failovers} failovers",
                          f"replicas' share of pairs (breaker): {shares}",
                          f"goal (at least {GOAL:.0%} reranked, none late, every result within the contract): "
                          f"{'met' if self.goal_met else 'MISSED'}"])


class _Killer:
    """Kills ``server`` once ``at`` recalls are back (called by the agents after each recall)."""

    def __init__(self, server: FlakyServer, at: int) -> None:
        self.server, self.at, self.killed_after = server, at, -1

    def __call__(self, back: int) -> None:
        if self.killed_after < 0 and back >= self.at:
            self.server.kill()
            self.killed_after = back


def _survivors_served(servers: Sequence[FlakyServer], killer: _Killer) -> Callable[[], Awaitable[int]]:
    """The scoring requests the servers still running have received (the dead one tells nothing)."""

    async def served() -> int:
        return sum([await s.requests_served() for s in servers if s is not killer.server or killer.killed_after < 0])

    return served


async def run_failover(plan: FailoverPlan = FailoverPlan(), **settings: Any) -> FailoverReport:
    """The scenario against fresh servers and a fresh owner loop; ``settings`` override the defaults."""
    runtime.shutdown()
    load_plan = LoadPlan(recalls=plan.recalls, concurrency=plan.concurrency, warmup=plan.warmup,
                         timeout=plan.timeout)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(FlakyServer(HEALTHY)) for _ in range(plan.replicas)]
        config = load_config(",".join(s.url for s in servers), **{"timeout": plan.timeout, **settings})
        killer = _Killer(servers[0], round(plan.recalls * plan.kill_after))
        label = f"{plan.replicas} replicas, one killed, concurrency {plan.concurrency}"
        report = await run_load(label, load_plan, config, _survivors_served(servers, killer), after_each=killer)
        stats = runtime.statistics()
    runtime.shutdown()
    return FailoverReport(load=report, killed=servers[0].url, killed_after=killer.killed_after,
                          failovers=stats.failovers, replicas=[r.as_dict() for r in stats.replicas])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recalls", type=int, default=FailoverPlan.recalls)
    parser.add_argument("--concurrency", type=int, default=FailoverPlan.concurrency)
    parser.add_argument("--warmup", type=int, default=FailoverPlan.warmup)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    plan = FailoverPlan(recalls=args.recalls, concurrency=args.concurrency, warmup=args.warmup)
    report = asyncio.run(run_failover(plan))
    print(report.summary(), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report.as_dict() | {"plan": asdict(plan)}, out, indent=2)
    return 0 if report.goal_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
