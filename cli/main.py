"""``a0-reranker`` / ``python -m a0_reranker``: parse the arguments and dispatch to one command.

User errors print one line on stderr and exit 2 (bad arguments, URL, file) or 1 (the server is
unreachable or answers wrongly), never a traceback. Ctrl-C exits 130 and SIGTERM (``timeout``,
``docker stop``, systemd) 143, each after the command has stopped what it started (the benchmark's
server process included). Text the terminal cannot encode is printed escaped, never an error.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import NoReturn

from .. import __version__
from ..core.redaction import without_userinfo
from ..service import runtime
from . import bench, demo, probe, rerank
from .errors import USAGE, CliError

PROG = "a0-reranker"


class _Parser(argparse.ArgumentParser):
    """argparse with its error as one line (the usage is one ``--help`` away). The error quotes what it
    could not use, e.g. the entries of an unquoted endpoint list after the first: without their passwords."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: {without_userinfo(message)} (see {self.prog} --help)\n")


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


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived. A KeyboardInterrupt, so it unwinds exactly as Ctrl-C does (asyncio included)."""


def main(argv: Sequence[str] | None = None) -> int:
    _escape_what_cannot_be_printed()
    with _sigterm_unwinds():
        return _run(argv)


def _run(argv: Sequence[str] | None) -> int:
    command = PROG
    try:
        args = build_parser().parse_args(argv)
        command = f"{PROG} {args.command_name}"
        return int(args.run(args))
    except CliError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except Terminated:
        print(f"{command}: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        runtime.shutdown()  # close the engine's HTTP session before the interpreter exits


def _escape_what_cannot_be_printed() -> None:
    """A lone surrogate (from undecodable argv bytes or a JSON escape) or a character the terminal's
    encoding lacks is printed as a backslash escape instead of failing the command."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """While a command runs, SIGTERM raises ``Terminated`` (once: a second one does not cut the cleanup
    short). Without this the process would die at once and leave its child processes running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(_signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
