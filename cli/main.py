"""``a0-reranker`` / ``python -m a0_reranker``: parse the arguments and run one command, ending as ``exits``
says; the benchmark program runs through the same ``run_program``. The commands load only once the signal
handlers are in place, so a Ctrl-C during that second of start-up is a stop like any other."""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .. import __version__
from ..core.redaction import without_url_secrets
from . import exits

PROG = "a0-reranker"


class Parser(argparse.ArgumentParser):
    """argparse with its error as one line, less the passwords and queries of the URLs it quotes."""

    def error(self, message: str) -> NoReturn:
        self.exit(exits.USAGE, f"{self.prog}: {without_url_secrets(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description="Rerank Agent Zero's recalled memories with a cross-encoder server: "
                                           "check a server, rank documents, and see a recall before and after.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command_name", metavar="COMMAND", required=True,
                                     parser_class=Parser)
    from . import demo, probe, rerank  # here, not above: see the module docstring
    for command in (demo, probe, rerank):
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_program(PROG, build_parser, argv)


def run_program(prog: str, build: Callable[[], argparse.ArgumentParser], argv: Sequence[str] | None) -> int:
    # a lone surrogate (undecodable argv bytes, a JSON escape) or a character the terminal lacks: printed escaped
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    command = prog
    with exits.stop_on_signals(prog):
        try:
            args = build().parse_args(argv)
            command = f"{prog} {args.command_name}" if getattr(args, "command_name", None) else prog
            exits.name_command(command)
            return int(args.run(args))
        except exits.CliError as exc:
            print(f"{command}: {exc}", file=sys.stderr)
            return exc.exit_code
        except exits.Stopped as stopped:
            return exits.announce(stopped)
        except KeyboardInterrupt:  # raised by other code than the handlers (not expected): still one line
            return exits.announce(exits.Stopped(signal.SIGINT))
        except BrokenPipeError:  # e.g. piped into head: stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        finally:  # close the engine's HTTP session and loop before the interpreter exits, if a command started it
            runtime = sys.modules.get(f"{__package__.rpartition('.')[0]}.service.runtime")
            if runtime is not None:
                runtime.shutdown()


if __name__ == "__main__":
    sys.exit(main())
