"""``--overload`` and ``--burst`` of the benchmark program: what the plugin does past a server's capacity.

``--overload``: a one-GPU cost-model ``/rerank`` server in its own process (or ``--replicas N`` of
them), recalls arriving as a Poisson process at each ``--loads`` multiple of its capacity, for each
``--timeouts`` and ``--seeds``, with shedding on and off side by side (``bench/overload_bench.py``).
Writes ``overload.json``. ``--burst``: waves of 32 recalls awaited together, over one replica and over
``--replicas N`` (default 3) of a model whose pairs dominate its cost (``bench/burst_bench.py``).
Writes ``burst.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..cli.exits import CliError
from ..cli.formatting import table
from .burst_bench import WaveRun, compare
from .harness import measured, output_folder, start_cost_model, write_file
from .list_options import int_list, positive_float_list
from .overload_bench import GOODPUT_GOAL, ONE_GPU, SHED_GOAL_MS, OverloadRun, goals_met, run_one
from .replicas_bench import BIG_MODEL, slower
from .report import bench_document

BURST_GOAL = 2.5  # 3 equal replicas finish a burst at least this much sooner than one


@dataclass(frozen=True)
class OverloadPlan:
    loads: tuple[float, ...]
    timeouts: tuple[float, ...]
    seeds: tuple[int, ...]
    seconds: float

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> OverloadPlan:
        base = QUICK if args.quick else FULL
        return cls(args.loads or base.loads, args.timeouts or base.timeouts, args.seeds or base.seeds,
                   args.seconds or base.seconds)


QUICK = OverloadPlan((2.0,), (2.0,), (1,), 6.0)
FULL = OverloadPlan((1.2, 2.0, 5.0), (2.0, 10.0), (1, 2, 3), 20.0)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overload", action="store_true",
                        help="measure overload instead: open-loop arrivals at several multiples of one GPU's "
                             "capacity (or of --replicas N), shedding on and off side by side; writes overload.json")
    parser.add_argument("--burst", action="store_true",
                        help="measure bursts instead: waves of 32 recalls awaited together over one replica and over "
                             "--replicas N (default 3); writes burst.json")
    parser.add_argument("--loads", type=positive_float_list, metavar="LIST",
                        help="with --overload: multiples of the capacity (default: 1.2,2,5)")
    parser.add_argument("--timeouts", type=positive_float_list, metavar="LIST",
                        help="with --overload: rerank_timeout values in seconds (default: 2,10)")
    parser.add_argument("--seeds", type=int_list, metavar="LIST",
                        help="with --overload: arrival seeds (default: 1,2,3)")
    parser.add_argument("--seconds", type=float, metavar="S",
                        help="with --overload: seconds of load a run (default: 20)")


def run(args: argparse.Namespace) -> int:
    if args.overload and args.burst:
        raise CliError("--overload and --burst are two benchmarks: run one at a time")
    if args.endpoint:
        raise CliError(f"--{'overload' if args.overload else 'burst'} starts its own cost-model servers; "
                       "it does not take --endpoint")
    out = output_folder(args.out)
    return _overload(args, out) if args.overload else _burst(args, out)


def _overload(args: argparse.Namespace, out: Any) -> int:
    plan = OverloadPlan.from_args(args)
    if not 2 <= plan.seconds <= 3600:
        raise CliError("--seconds: from 2 to 3600 (the first 2 s of a run are its warm-up)")
    replicas = args.replicas or 1
    cases = [(load, timeout, seed, shedding) for timeout in plan.timeouts for load in plan.loads
             for seed in plan.seeds for shedding in (True, False)]

    async def all_runs(progress: Callable[[str], None]) -> list[OverloadRun]:
        runs = []
        for load, timeout, seed, shedding in cases:
            label = f"{load:g}x, timeout {timeout:g} s, seed {seed}, shedding {'on' if shedding else 'off'}"
            runs.append(await run_one(load, timeout, seed, shedding=shedding, seconds=plan.seconds,
                                      replicas=replicas, ready=functools.partial(progress, label)))
        return runs

    runs = measured([1.0] * len(cases), all_runs, "the overload benchmark")
    print(f"{'one GPU' if replicas == 1 else f'{replicas} GPUs'}, {ONE_GPU.forward_ms:g} ms a pass + "
          f"{ONE_GPU.pair_ms:g} ms a pair, 20 memories a recall: {runs[0].capacity_per_s:g} recalls/s capacity")
    print("\n".join(overload_table(runs)))
    print("\n".join(overload_verdicts(runs)))
    document = bench_document({"runs": [r.as_dict() for r in runs]},
                              {"server": "cost-model /rerank", "cost_model": asdict(ONE_GPU), "replicas": replicas,
                               "seconds": plan.seconds})
    write_file(out / "overload.json", json.dumps(document, indent=2) + "\n")
    print(f"wrote {out / 'overload.json'}")
    return 0


def overload_table(runs: Sequence[OverloadRun]) -> list[str]:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    rows = [(f"{r.load:g}x", f"{r.timeout:g} s", str(r.seed), "on" if r.shedding else "off",
             f"{r.goodput_ratio:.0%}", f"{r.gpu_busy:.0%}", f"{r.outcomes.get('reranked', 0)}/{r.offered}",
             f"{sum(v for k, v in r.outcomes.items() if k in ('overload', 'queue_full'))} ({ms(r.shed_p50_ms)})",
             str(r.outcomes.get("timeout", 0)), "opened" if r.breaker_opened else "closed",
             f"{r.recovery_reranked}/{r.recovery_recalls}")
            for r in runs]
    headers = ("load", "timeout", "seed", "shedding", "goodput", "GPU busy", "reranked", "shed (p50 ms)",
               "timeouts", "breaker", "after")
    return table(headers, rows, ">>>>>>>>>><")


def overload_verdicts(runs: Sequence[OverloadRun]) -> list[str]:
    on = [r for r in runs if r.shedding]
    met = sum(goals_met(r) for r in on)
    worst = min(on, key=lambda r: r.goodput_ratio)
    lines = [f"shedding on: {met} of {len(on)} runs met every goal (goodput at least {GOODPUT_GOAL:.0%} of "
             f"capacity, the breaker closed, shed recalls back in {SHED_GOAL_MS:g} ms at the median, no late or "
             f"wrong result, the 50 recalls after the load all reranked); lowest goodput {worst.goodput_ratio:.0%} "
             f"({worst.label})"]
    off = [r for r in runs if not r.shedding]
    if off:
        lines.append(f"shedding off: goodput {statistics.median(r.goodput_ratio for r in off):.0%} of capacity at "
                     f"the median (lowest {min(r.goodput_ratio for r in off):.0%})")
    return lines


def _burst(args: argparse.Namespace, out: Any) -> int:
    replicas = args.replicas or 3
    if not 2 <= replicas <= 8:
        raise CliError("--replicas: with --burst, from 2 to 8")
    cost = slower(BIG_MODEL, args.cost_scale)
    rounds, waves = (1, 5) if args.quick else (3, 30)
    with contextlib.ExitStack() as stack:
        urls = [start_cost_model(stack, cost) for _ in range(replicas)]
        runs = measured([1.0], lambda progress: _waves(urls, waves, rounds, progress), "the burst benchmark")
    one, many = (statistics.median(r.median_ms for r in runs if r.replicas == n) for n in (1, replicas))
    print(f"waves of 32 recalls of 20 memories, awaited together; each replica one GPU: {cost.forward_ms:g} ms a "
          f"pass + {cost.pair_ms:g} ms a pair")
    print(f"one replica: {one:.0f} ms a wave; {replicas} replicas: {many:.0f} ms, {one / many:.2f}x sooner "
          f"(goal with 3: at least {BURST_GOAL:g}x)")
    document = bench_document({"replicas": replicas, "wave_ms": {"1": one, str(replicas): many},
                               "ratio": one / many, "runs": [asdict(r) for r in runs]},
                              {"server": "cost-model replicas", "cost_model": asdict(cost), "waves": waves})
    write_file(out / "burst.json", json.dumps(document, indent=2) + "\n")
    print(f"wrote {out / 'burst.json'}")
    return 0


async def _waves(urls: Sequence[str], waves: int, rounds: int, progress: Callable[[str], None]) -> list[WaveRun]:
    progress(f"{rounds} round(s) of {waves} waves over 1 and {len(urls)} replicas")
    return await compare(urls, waves=waves, size=32, documents=20, rounds=rounds)

