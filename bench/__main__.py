"""``python -m a0_reranker.bench``: the benchmarks, from a checkout (they are not in the installed package)."""

import argparse
import sys

from ..cli.main import run_program
from . import PROG


def _parser() -> argparse.ArgumentParser:  # imported only once the signal handlers are in place
    from .command import build_parser

    return build_parser()


if __name__ == "__main__":
    sys.exit(run_program(PROG, _parser, None))
