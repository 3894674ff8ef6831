"""``python -m a0_reranker.bench``: naive (one HTTP request per recall) against the micro-batcher, at
several concurrencies; with ``--replicas``, ``--overload`` or ``--burst``, the other benchmarks.

By default it runs against the built-in cost-model server (a child process that costs time the way
one GPU does); ``--endpoint`` measures a real server, which must speak vLLM's ``/score`` because both
modes send the same Qwen3 ``/score`` requests. Writes ``bench.json`` and ``bench.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from ..cli.exits import FAILED, CliError
from ..cli.main import Parser
from ..cli.options import config_problem, positive_int
from ..core.errors import ConfigError
from ..service import runtime
from . import PROG, overload_command, replicas_command
from .batching_bench import DEFAULT_CONCURRENCY, BenchResult, batched_config, run_benchmark
from .cost_model_server import CostModel
from .harness import enough_recalls, measured, output_folder, start_cost_model, write_file
from .list_options import int_list
from .report import INSTALL_HINT, bench_document, bench_table, write_plot

QUICK_CONCURRENCY = (1, 4, 16)


@dataclass(frozen=True)
class Plan:
    concurrencies: tuple[int, ...]
    documents: int
    recalls: Callable[[int], int]
    recalls_rule: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Plan:
        concurrencies = args.concurrency or (QUICK_CONCURRENCY if args.quick else DEFAULT_CONCURRENCY)
        if args.recalls is not None:
            enough_recalls(args.recalls, "level")
            count = args.recalls
            return cls(concurrencies, args.documents, lambda c: count, f"{count}")
        if args.quick:
            return cls(concurrencies, args.documents, lambda c: max(24, 2 * c), "max(24, 2 x concurrency)")
        return cls(concurrencies, args.documents, lambda c: max(200, 8 * c), "max(200, 8 x concurrency)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Run concurrent recalls in a closed loop, once sending one HTTP request per recall (naive) "
                    "and once through the plugin's micro-batcher, against the built-in cost-model server or "
                    "--endpoint (which must speak vLLM's /score). Writes bench.json and bench.png.",
    )
    parser.add_argument("--endpoint", metavar="URL", help="benchmark this vLLM /score server instead")
    parser.add_argument("--concurrency", type=int_list, metavar="LIST",
                        help="concurrent recalls per level (default: 1,4,16,64; with --quick: 1,4,16)")
    parser.add_argument("--documents", type=positive_int, default=20, metavar="N",
                        help="documents per recall (default: 20, the plugin's candidate pool)")
    parser.add_argument("--recalls", type=positive_int, metavar="N",
                        help="recalls per level (default: max(200, 8 x concurrency); "
                             "with --quick: max(24, 2 x concurrency))")
    parser.add_argument("--out", default="bench/results", metavar="DIR",
                        help="where bench.json and bench.png go (default: bench/results)")
    parser.add_argument("--quick", action="store_true", help="a short run (seconds) to see that it works")
    parser.add_argument("--replicas", type=positive_int, metavar="N",
                        help="measure replicas instead: 1 ... N cost-model servers side by side at 32 concurrent "
                             "recalls, and N with one 4x slower; writes replicas.json")
    parser.add_argument("--cost-scale", type=float, default=1.0, metavar="F",
                        help="with --replicas: every cost of the cost model times F (default 1); on a loaded "
                             "machine a larger F makes the client's own turnaround small next to the servers'")
    overload_command.add_options(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.overload or args.burst:
        return overload_command.run(args)
    if args.replicas is not None:
        return replicas_command.run(args)
    plan = Plan.from_args(args)
    out = output_folder(args.out)
    if args.endpoint:
        _check_endpoint(args.endpoint)
    with _server(args.endpoint) as endpoint:
        result = _measure(endpoint, plan)
    print("\n".join(bench_table(result)))
    meta = {"server": "endpoint" if args.endpoint else "cost-model",
            "cost_model": None if args.endpoint else asdict(CostModel()),
            "settings": _batcher_settings(endpoint), "recalls_per_level": plan.recalls_rule}
    write_file(out / "bench.json", json.dumps(bench_document(result.as_dict(), meta), indent=2) + "\n")
    print(f"wrote {out / 'bench.json'}")
    title = (f"a0-reranker: micro-batched vs one request per recall, {plan.documents} documents per recall\n"
             + (args.endpoint if args.endpoint else _cost_model_label(CostModel())))
    if write_plot(result, out / "bench.png", title):
        print(f"wrote {out / 'bench.png'}")
    else:
        print(f"no plot: matplotlib is not installed; for bench.png run  {INSTALL_HINT}")
    return 0


def _measure(endpoint: str, plan: Plan) -> BenchResult:
    weights = [plan.recalls(c) for c in plan.concurrencies for _ in ("naive", "batched")]
    return measured(weights, lambda progress: run_benchmark(endpoint, concurrencies=plan.concurrencies,
                                                            documents=plan.documents, recalls=plan.recalls,
                                                            progress=progress),
                    f"the benchmark against {endpoint}")


@contextlib.contextmanager
def _server(endpoint: str | None) -> Iterator[str]:
    """The given endpoint (normalized), or the URL of a cost-model server running for the block."""
    if endpoint:
        yield batched_config(endpoint).endpoint
        return
    with contextlib.ExitStack() as stack:
        yield start_cost_model(stack)


def _cost_model_label(cost: CostModel) -> str:
    return (f"built-in cost-model server: one GPU, {cost.forward_ms:g} ms per forward pass + {cost.pair_ms:g} ms "
            f"per pair, {cost.request_ms:g} ms per request")


def _check_endpoint(endpoint: str) -> None:
    try:
        config = batched_config(endpoint, timeout=10.0)
    except ConfigError as exc:
        raise CliError(config_problem(exc, endpoint)) from None
    report = runtime.probe(config)
    if not report.ok:
        raise CliError(f"--endpoint must speak vLLM's /score for the benchmark: {report.message}", FAILED)


def _batcher_settings(endpoint: str) -> dict[str, Any]:
    config = batched_config(endpoint)
    return {"api": config.api, "batch_window_ms": config.batch_window_ms, "max_concurrency": config.max_concurrency,
            "max_pairs_per_request": config.max_pairs_per_request}
