"""What the benchmarks do outside this process: start their servers in child processes, create the
output folder and write the results, each failure as one ``CliError`` line."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from ..cli import exits
from ..cli.exits import FAILED, CliError
from .cost_model_server import CostModel, CostModelServer
from .progress import ProgressBar

T = TypeVar("T")


def start_cost_model(stack: contextlib.ExitStack, cost: CostModel | None = None) -> str:
    """A cost-model server running until ``stack`` closes; its URL. The child ignores Ctrl-C and SIGTERM
    (``bench/child_server.py``): this process stops it as it unwinds, so it never prints a traceback."""
    try:
        return stack.enter_context(CostModelServer(cost or CostModel())).url
    except EOFError:
        raise CliError("the cost-model server did not start: its process ended before it answered", FAILED) from None
    except OSError as exc:
        raise CliError(f"the cost-model server did not start: {exc}", FAILED) from None


def output_folder(path: str) -> Path:
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--out {path}: cannot create the folder ({exc.strerror or exc})") from None
    return folder


def write_file(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None


def measured(weights: Sequence[float], run: Callable[[Callable[[str], None]], Coroutine[Any, Any, T]], what: str) -> T:
    """Run one benchmark (``run(progress)``) under a progress bar weighted by ``weights``; a failure of
    the servers or the measurement becomes the CLI's one-line error."""
    try:
        with ProgressBar(weights) as bar:
            return exits.run(run(bar.step))
    except (aiohttp.ClientError, OSError, RuntimeError, statistics.StatisticsError) as exc:
        raise CliError(f"{what} failed: {exc}", FAILED) from None


def enough_recalls(recalls: int | None, per: str) -> None:
    if recalls is not None and recalls < 2:
        raise CliError(f"--recalls: at least 2 recalls per {per} are needed for latency percentiles")

