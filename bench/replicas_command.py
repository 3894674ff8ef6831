"""``--replicas N`` of the benchmark program: 1 ... N cost-model replicas side by side, and N with one 4x slower.

It starts its own servers (one child process each, one GPU each) and measures them through the
engine with the default settings; see ``bench/replicas_bench.py``. Writes ``replicas.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from ..cli.exits import CliError
from ..cli.formatting import table
from ..core.config import RerankerConfig
from .cost_model_server import CostModel
from .harness import enough_recalls, measured, output_folder, start_cost_model, write_file
from .replicas_bench import (
    BIG_MODEL,
    GOAL_RATIO,
    GOAL_REPLICAS,
    SLOWDOWN,
    ReplicaBenchResult,
    ReplicaSetup,
    expected_share,
    run_replica_benchmark,
    servers_needed,
    setups,
    slower,
)
from .report import bench_document

DEFAULT_CONCURRENCY, DEFAULT_RECALLS, DEFAULT_ROUNDS = 32, 600, 3
QUICK_RECALLS, QUICK_ROUNDS = 64, 1
MAX_REPLICAS = 8
MAX_COST_SCALE = 20.0


def run(args: argparse.Namespace) -> int:
    concurrency, recalls, rounds = _plan(args)
    out = output_folder(args.out)
    cost = slower(BIG_MODEL, args.cost_scale)
    replica_sets = setups(args.replicas, cost)
    with contextlib.ExitStack() as stack:
        servers = {cost: [start_cost_model(stack, cost) for _ in range(count)]
                   for cost, count in servers_needed(replica_sets).items()}
        result = _measure(servers, replica_sets, concurrency, args.documents, recalls, rounds)
    print(f"{concurrency} agents recalling {args.documents} memories in a closed loop; each replica one GPU: "
          f"{cost.forward_ms:g} ms a forward pass + {cost.pair_ms:g} ms a pair (the slow one {SLOWDOWN:g}x)")
    print("\n".join(replica_table(result)))
    print("\n".join(verdicts(result)))
    defaults = RerankerConfig()
    meta = {"server": "cost-model replicas", "cost_scale": args.cost_scale, "recalls_per_set": recalls,
            "rounds": rounds,
            "settings": {"max_concurrency": defaults.max_concurrency, "batch_window_ms": defaults.batch_window_ms,
                         "max_pairs_per_request": defaults.max_pairs_per_request, "hedge": defaults.hedge}}
    write_file(out / "replicas.json", json.dumps(bench_document(result.as_dict(), meta), indent=2) + "\n")
    print(f"wrote {out / 'replicas.json'}")
    return 0


def _plan(args: argparse.Namespace) -> tuple[int, int, int]:
    if args.endpoint:
        raise CliError("--replicas starts its own cost-model servers; it does not take --endpoint")
    if not 1 <= args.replicas <= MAX_REPLICAS:
        raise CliError(f"--replicas: from 1 to {MAX_REPLICAS}")
    if not 0 < args.cost_scale <= MAX_COST_SCALE:
        raise CliError(f"--cost-scale: more than 0 and at most {MAX_COST_SCALE:g}")
    if args.concurrency and len(args.concurrency) > 1:
        raise CliError("--concurrency: --replicas measures one concurrency (default 32)")
    concurrency = args.concurrency[0] if args.concurrency else DEFAULT_CONCURRENCY
    enough_recalls(args.recalls, "set")
    recalls = args.recalls or (QUICK_RECALLS if args.quick else DEFAULT_RECALLS)
    return concurrency, recalls, QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS


def _measure(servers: dict[CostModel, list[str]], replica_sets: list[ReplicaSetup], concurrency: int,
             documents: int, recalls: int, rounds: int) -> ReplicaBenchResult:
    weights = [recalls / len(s.costs) for _ in range(rounds) for s in replica_sets]  # about what each set takes
    return measured(weights, lambda progress: run_replica_benchmark(servers, replica_sets, concurrency=concurrency,
                                                                    documents=documents, recalls=recalls,
                                                                    rounds=rounds, progress=progress),
                    "the replica benchmark")


def replica_table(result: ReplicaBenchResult) -> list[str]:
    rows = [
        (r["set"], f"{r['recalls_per_s']:.1f}", f"{r['ratio_to_one']:.2f}x", f"{r['p95_ms']:.0f}",
         f"{r['pairs_per_request']:g}", _cpu(r), _replicas(r))
        for r in result.rows()
    ]
    headers = ("replicas", "recalls/s", "vs one", "p95 ms", "pairs/request", "client CPU (waiting), load",
               "share of pairs (GPU busy) per replica")
    return table(headers, rows, "<>>>>><")


def _replicas(row: dict[str, Any]) -> str:
    return "  ".join(f"{s:.0%} ({b:.0%})" for s, b in zip(row["shares"], row["gpu_busy"], strict=True))


def _cpu(row: dict[str, Any]) -> str:
    waiting = "" if row["client_cpu_wait"] is None else f" ({row['client_cpu_wait']:.2f})"
    return f"{row['client_cpu']:.2f}{waiting}, {row['load_average']:.1f}"


def verdicts(result: ReplicaBenchResult) -> list[str]:
    """The two acceptance figures, in words."""
    lines = []
    if (ratio := result.goal_ratio) is not None:
        met = "met" if ratio >= GOAL_RATIO else "MISSED"
        lines.append(f"{GOAL_REPLICAS} replicas: {ratio:.2f}x the throughput of one (goal: at least "
                     f"{GOAL_RATIO:g}x): {met}")
    skewed = [r for r in result.rows() if len(set(r["slowdowns"])) > 1]
    for row in skewed:
        slow = row["slowdowns"].index(max(row["slowdowns"]))
        lines.append(f"{row['set']}: the slow one got {row['shares'][slow]:.1%} of the pairs (in proportion to "
                     f"speed: {expected_share(row['slowdowns'], slow):.1%}; an equal share: "
                     f"{1 / len(row['shares']):.1%})")
    return lines

