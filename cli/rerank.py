"""``rerank --endpoint URL QUERY [DOC ...]``: rank documents through the plugin's engine and print them. Documents
come from the command line, a file, or stdin: one per line, or JSON Lines of strings or objects with a ``"text"``
string (``--format auto``: when the first non-empty line is one). Text that is not valid Unicode (a lone
surrogate, from undecodable bytes or a ``"\ud800"`` escape) is refused."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ..core.config import RerankerConfig
from ..core.scores import LONE_SURROGATE
from ..service import runtime
from . import exits
from .exits import FAILED, CliError
from .formatting import table, terminal_width
from .options import add_server_options, as_options, positive_int, server_config

FORMATS = ("auto", "lines", "jsonl")


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
    if not query.strip():
        raise CliError("QUERY: is blank (empty or whitespace only): there is nothing to rank against")
    documents = read_documents(args.documents, args.file, args.format)
    started = time.monotonic()
    result = exits.run(runtime.rerank_result_async(query, documents, config=config))
    elapsed_ms = (time.monotonic() - started) * 1000
    if result.ranking is None:
        hint = " (see --max-queued-pairs)" if result.reason == "queue_full" else ""
        why = as_options(result.message) or result.reason
        raise CliError(f"no ranking from {config.endpoint}: {why}{hint}", FAILED)
    # a blank document's score (never sent, below every other) is -inf: null in JSON, which has no infinity
    rows: list[dict[str, Any]] = [{"rank": rank, "score": score if math.isfinite(score) else None, "index": index,
                                   "document": documents[index]}
                                  for rank, (index, score) in enumerate(result.ranking[: args.top], 1)]
    if args.json:
        print(json.dumps({"query": args.query, "endpoint": config.endpoint, "api": result.api,
                          "elapsed_ms": round(elapsed_ms, 1), "retries": result.retries, "results": rows,
                          "statistics": runtime.statistics(config.endpoints).as_dict()}, indent=2, ensure_ascii=False))
    else:
        print(f"{len(documents)} documents ranked by {config.endpoint} ({result.api} API, {elapsed_ms:.0f} ms)")
        body = [(str(r["rank"]), "-" if r["score"] is None else f"{r['score']:.4f}", str(r["index"]), r["document"])
                for r in rows]
        print("\n".join(table(("rank", "score", "index", "document"), body, ">>><", terminal_width())))
    return 0


def read_documents(arguments: Sequence[str], path: str | None, fmt: str) -> list[str]:
    """The documents to rank, in input order; a user error when there are none or the file is unreadable."""
    documents = [checked_text(text, f"DOC {number}") for number, text in enumerate(arguments, 1)]
    if path is not None:
        source = "stdin" if path == "-" else path
        lines = [(number, line) for number, line in enumerate(_read_text(path, source).splitlines(), 1) if line.strip()]
        if fmt == "auto":
            fmt = "jsonl" if lines and _looks_like_json(lines[0][1]) else "lines"
        for number, line in lines:
            where = f"{source} line {number}"
            documents.append(checked_text(line if fmt == "lines" else _json_document(line, where), where))
    if not documents:
        raise CliError("no documents to rank: give them after the query, or use --file PATH (--file - for stdin)")
    return documents


def checked_text(text: str, where: str) -> str:
    """``text``, unless it is not valid Unicode: then a user error that says where."""
    bad = LONE_SURROGATE.search(text)
    if bad is not None:
        raise CliError(f"{where}: not valid Unicode text at character {bad.start() + 1} (undecodable bytes, "
                       f"or half of a surrogate pair such as \\ud800)")
    return text


def _looks_like_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), str | dict)
    except (ValueError, RecursionError):
        return False


def _json_document(line: str, where: str) -> str:
    try:
        value: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CliError(f"{where}: not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError):  # an integer too long to read, nesting too deep to follow
        raise CliError(f"{where}: JSON this reader cannot take (too deep or too long)") from None
    if isinstance(value, dict):
        value = value.get("text")
    if not isinstance(value, str):
        raise CliError(f'{where}: expected a JSON string or an object with a "text" string')
    return value


def _read_text(path: str, source: str) -> str:
    stdin: TextIO | None = sys.stdin  # None when the process started without one
    if path == "-" and (stdin is None or stdin.closed):
        raise CliError("cannot read stdin: it is closed (pipe the documents in, or use --file PATH)")
    try:
        return stdin.read() if stdin is not None and path == "-" else Path(path).read_text(encoding="utf-8")
    except ValueError as exc:  # UnicodeDecodeError, or a stream closed under us
        reason = "it is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "it is closed"
        raise CliError(f"cannot read {source}: {reason}") from None
    except OSError as exc:
        raise CliError(f"cannot read {source}: {exc.strerror or exc}") from None
