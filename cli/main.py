"""``a0-reranker`` / ``python -m a0_reranker``: parse the arguments and dispatch to one command.

User errors print one line on stderr and exit 2 (bad arguments, URL, file) or 1 (the server is
unreachable or answers wrongly), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..service import runtime
from . import bench, demo, probe, rerank
from .errors import USAGE, CliError

PROG = "a0-reranker"


class _Parser(argparse.ArgumentParser):
    """argparse with its error as one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Rerank Agent Zero's recalled memories with a cross-encoder server: check a server, rank "
                    "documents, see a recall before and after, and measure what batching buys.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command_name", metavar="COMMAND", required=True,
                                     parser_class=_Parser)
    for command in (demo, probe, rerank, bench):
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = f"{PROG} {args.command_name}"
    try:
        return int(args.run(args))
    except CliError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        runtime.shutdown()  # close the engine's HTTP session before the interpreter exits


if __name__ == "__main__":
    sys.exit(main())
