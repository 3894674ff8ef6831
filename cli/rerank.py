"""``rerank --endpoint URL QUERY [DOC ...]``: rank documents through the plugin's engine and print them."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from ..core.config import RerankerConfig
from ..service import runtime
from ..service.reranker_service import RerankResult
from . import signals
from .documents import FORMATS, checked_text, read_documents
from .errors import FAILED, CliError
from .formatting import table, terminal_width
from .options import add_server_options, positive_int, server_config


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "rerank", help="rank documents for a query with a reranker server",
        description="Rank documents for QUERY through the plugin's engine (auto-detection, batching, limits). "
                    "Documents come after the query, or from --file (one per line, or JSON Lines of strings "
                    'or {"text": ...} objects).',
    )
    parser.add_argument("--endpoint", required=True, metavar="URL", help="the server's base URL")
    add_server_options(parser)
    parser.add_argument("--file", metavar="PATH", help="read documents from PATH (- for stdin)")
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="how --file is read: plain lines, JSON Lines, or auto (default)")
    parser.add_argument("--top", type=positive_int, metavar="N", help="print only the best N")
    parser.add_argument("--max-queued-pairs", type=positive_int, default=RerankerConfig().max_queued_pairs,
                        metavar="N", help="pairs the engine holds in its queue at most, as rerank_max_queued_pairs "
                                          "(default: %(default)s); a lone call larger than this still goes through")
    parser.add_argument("--json", action="store_true", help="print the ranking as JSON")
    parser.add_argument("query", metavar="QUERY")
    parser.add_argument("documents", metavar="DOC", nargs="*")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = server_config(args, args.endpoint, max_queued_pairs=args.max_queued_pairs)
    query = checked_text(args.query, "QUERY")
    documents = read_documents(args.documents, args.file, args.format)
    started = time.monotonic()
    result = signals.run(runtime.rerank_result_async(query, documents, config=config))
    elapsed_ms = (time.monotonic() - started) * 1000
    if result.ranking is None:
        hint = " (see --max-queued-pairs)" if result.reason == "queue_full" else ""
        raise CliError(f"no ranking from {config.endpoint}: {result.message or result.reason}{hint}", FAILED)
    rows = ranking_rows(result, documents)[: args.top]
    if args.json:
        print(json.dumps({"query": args.query, "endpoint": config.endpoint, "api": result.api,
                          "elapsed_ms": round(elapsed_ms, 1), "retries": result.retries, "results": rows,
                          "statistics": runtime.statistics().as_dict()}, indent=2, ensure_ascii=False))
    else:
        print(f"{len(documents)} documents ranked by {config.endpoint} ({result.api} API, {elapsed_ms:.0f} ms)")
        print("\n".join(ranking_table(rows)))
    return 0


def ranking_rows(result: RerankResult, documents: Sequence[str]) -> list[dict[str, Any]]:
    ranking = result.ranking or []
    return [{"rank": rank, "score": score, "index": index, "document": documents[index]}
            for rank, (index, score) in enumerate(ranking, 1)]


def ranking_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    body = [(str(r["rank"]), f"{r['score']:.4f}", str(r["index"]), r["document"]) for r in rows]
    return table(("rank", "score", "index", "document"), body, ">>><", terminal_width())
