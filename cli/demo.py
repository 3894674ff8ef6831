"""``demo``: one memory recall, before and after reranking, with no setup at all. Without ``--endpoint`` it starts
the embedded demo server on 127.0.0.1. The "before" is an embedding-like order; the "after" is what the plugin's
own recall path, ``rerank_pool``, returns for it. ``--serve`` keeps that server running instead, until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import textwrap
from dataclasses import dataclass
from typing import Any

from ..core.config import RerankerConfig
from ..core.probe_report import ProbeReport
from ..core.scores import RecallOutcome
from ..core.statistics import PoolStatistics
from ..demo import KEEP, MEMORIES, QUERY, embedding_order
from ..demo.server import LABEL, demo_server
from ..service import runtime
from . import exits
from .exits import FAILED, CliError
from .formatting import bold, table, terminal_width
from .options import add_server_options, as_options, port_number, positive_int, server_config, server_options_given


@dataclass(frozen=True)
class DemoRun:
    endpoint: str
    embedded: bool
    probe: ProbeReport
    before: list[tuple[float, str]]  # (similarity, memory) in embedding order
    after: list[tuple[float, int, str]]  # (score, position before, memory) of the --limit kept, or all there are
    outcome: RecallOutcome[str]
    limit: int  # --limit, as given
    pool: PoolStatistics  # the engine's pool counters after the recall (what the status tool shows in A0)

    @property
    def keeps_all(self) -> bool:
        return len(self.after) >= len(self.before)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "demo", help="see a memory recall before and after reranking (no setup needed)",
        description="Recall sample memories for the question 'What changed in the March 1 upgrade?', in plain "
                    "embedding order and reranked through the plugin's own recall path. With no --endpoint, an "
                    "embedded demo server (word-overlap scorer, Infinity's API) runs on 127.0.0.1.",
    )
    parser.add_argument("--endpoint", metavar="URL", help="use this reranker server instead of the embedded demo")
    add_server_options(parser)
    parser.add_argument("--limit", type=positive_int, metavar="N",
                        help=f"memories the recall keeps (default: {KEEP}, as Agent Zero)")
    parser.add_argument("--json", action="store_true", help="print the before and after as JSON")
    parser.add_argument("--serve", action="store_true",
                        help="keep the embedded demo server running (until Ctrl-C) and print the commands that use it")
    parser.add_argument("--port", type=port_number, metavar="N",
                        help="with --serve: the port on 127.0.0.1 (default: a free one)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.serve:
        recall_only = {"--endpoint": args.endpoint is not None, "--limit": args.limit is not None,
                       "--json": args.json, **dict.fromkeys(server_options_given(args), True)}
        if unused := [option for option, given in recall_only.items() if given]:
            raise CliError(f"--serve runs the embedded demo server; it does not take {', '.join(unused)}")
        return exits.run(serve(args.port or 0))
    if args.port is not None:
        raise CliError("--port sets the port of demo --serve; without --serve the demo server takes a free port")
    args.limit = args.limit or KEEP
    # bad input (an empty --endpoint too) fails before anything starts
    given = server_config(args, args.endpoint) if args.endpoint is not None else None
    demo = exits.run(recall(args, given))
    print(json.dumps(as_dict(demo), indent=2) if args.json else render(demo))
    return 0


async def serve(port: int) -> int:
    """Serve the demo on 127.0.0.1, saying what to try on it, until a signal cancels the wait."""
    async with contextlib.AsyncExitStack() as stack:
        try:
            url = await stack.enter_async_context(demo_server(port))
        except OSError as exc:
            raise CliError(f"the demo server cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
        documents = " ".join(f'"{memory}"' for memory in MEMORIES[:3])
        print(f"Demo reranker at {url} (Infinity's API; {LABEL})\n  a0-reranker probe {url}\n"
              f'  a0-reranker rerank --endpoint {url} "{QUERY}" {documents}\n'
              f"  a0-reranker demo --endpoint {url}\nServing until Ctrl-C.", flush=True)
        await asyncio.Event().wait()
    return 0


async def recall(args: argparse.Namespace, given: RerankerConfig | None) -> DemoRun:
    """Probe the server (the embedded one unless ``given``), then rerank the pool in embedding order."""
    async with contextlib.AsyncExitStack() as stack:
        config = given
        if config is None:
            config = server_config(args, await stack.enter_async_context(demo_server()))
        report = await runtime.probe_async(config)
        if not report.ok:
            raise CliError(f"the reranker at {config.endpoint} is not usable: {as_options(report.message)}", FAILED)
        before = [(similarity, MEMORIES[index]) for index, similarity in embedding_order(QUERY, MEMORIES)]
        outcome = await runtime.rerank_pool(QUERY, [memory for _, memory in before], limit=args.limit, config=config)
        if not outcome.applied or outcome.ranking is None:
            raise CliError(f"the recall kept its stock order ({outcome.reason}: {as_options(outcome.message)})", FAILED)
        after = [(score, index + 1, before[index][1]) for index, score in outcome.ranking[: args.limit]]
        return DemoRun(config.endpoint, given is None, report, before, after, outcome, args.limit,
                       runtime.statistics().pool)


def as_dict(demo: DemoRun) -> dict[str, Any]:
    return {
        "query": QUERY,
        "reranker": {"endpoint": demo.endpoint, "embedded": demo.embedded,
                     "scorer": LABEL if demo.embedded else None, "probe": demo.probe.as_dict(note=False)},
        "limit": demo.limit, "kept": len(demo.after),
        "before": [{"position": p, "similarity": round(s, 4), "memory": m} for p, (s, m) in enumerate(demo.before, 1)],
        "after": [{"position": p, "score": s, "was": was, "memory": m} for p, (s, was, m) in enumerate(demo.after, 1)],
        "rerank_ms": round(demo.outcome.elapsed_s * 1000, 1), "pool": demo.pool.as_dict(),
    }


def render(demo: DemoRun) -> str:
    width = terminal_width()
    stock = [(f"{p}", f"{similarity:.3f}", memory) for p, (similarity, memory) in enumerate(demo.before, 1)]
    before = table(("#", "similarity", "memory"), stock, ">><", width - 2)
    if not demo.keeps_all:
        before.insert(len(demo.after) + 1, f"{'-' * 4} the recall keeps the {len(demo.after)} above {'-' * 4}")
    reranked = [(f"{p:2d}", f"{score:.3f}", f"#{was}", memory) for p, (score, was, memory) in enumerate(demo.after, 1)]
    after = table(("#", "score", "was", "memory"), reranked, ">>><", width - 2)
    lines = [bold("a0-reranker demo: one memory recall, before and after reranking"), "", *_setting(demo, width)]
    lines += ["", bold("BEFORE") + "  plain embedding recall (stand-in: bag-of-words cosine, one vector per memory)",
              *(f"  {line}" for line in before)]
    lines += ["", bold("AFTER") + f"   reranked by the plugin's recall path (rerank_pool over all {len(stock)} "
              f"candidates, {demo.outcome.elapsed_s * 1000:.0f} ms)", *(f"  {line}" for line in after)]
    lines += ["", *textwrap.wrap(_verdict(demo), width)]
    if demo.embedded:
        lines += ["", "Try your own server:  a0-reranker demo --endpoint http://HOST:PORT   "
                      "(or: a0-reranker probe http://HOST:PORT)"]
    return "\n".join(lines)


def _setting(demo: DemoRun, width: int) -> list[str]:
    if demo.embedded:
        server = [f"embedded demo server {demo.endpoint} (Infinity's API: POST /rerank, GET /models)",
                  f"scorer: {LABEL}"]
    else:
        server = [f"your server at {demo.endpoint}"]
    kept = f"the recall keeps the best {len(demo.after)}"
    if demo.keeps_all:
        more = f" (--limit {demo.limit} is more than there are)" if demo.limit > len(demo.after) else ""
        kept = f"the recall keeps all {len(demo.after)}{more}"
    rows = [("question", [QUERY]), ("memories", [f"{len(demo.before)} sample memories; {kept}"]),
            ("reranker", server), ("detected", [demo.probe.message])]
    return [f"  {name if i == 0 else '':<10}{line}" for name, texts in rows
            for i, line in enumerate(line for text in texts for line in textwrap.wrap(text, width - 12))]


def _verdict(demo: DemoRun) -> str:
    change = demo.outcome.change
    if change is None or not demo.after:
        return "The reranker did not change the recall."
    top_was = demo.after[0][1]
    top = "kept its top memory" if top_was == 1 else f"the new top memory was #{top_was} in embedding order"
    if demo.keeps_all:
        return (f"{bold('Result:')} the recall keeps all {len(demo.after)} memories, so reranking could only reorder "
                f"them (try a lower --limit); {top}.")
    recalled = "recalled memory was" if change.limit == 1 else "recalled memories were"
    return (f"{bold('Result:')} {change.replaced} of the {change.limit} {recalled} replaced "
            f"(rescued from further down the pool); {top}.")
