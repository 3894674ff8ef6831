"""CLI tier: run ``python -m a0_reranker`` (and the developers' ``python -m a0_reranker.bench``) as a
subprocess, the way a user does.

The repository root is linked as the package ``a0_reranker`` in a temporary folder put on the child's
PYTHONPATH, exactly what ``pip install`` maps it to (pyproject's ``package-dir``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.a0_layout import REPO_ROOT
from support.ports import fresh_port
from support.servers import RunningServer, serve_in_thread

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def package_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    (folder / "a0_reranker").symlink_to(REPO_ROOT, target_is_directory=True)
    return folder


@pytest.fixture(scope="session")
def cli(package_path: Path) -> Cli:
    """``cli("probe", url, input=..., env={...}, path=[...])`` runs the command and returns the finished process."""
    return _runner(package_path, "a0_reranker")


@pytest.fixture(scope="session")
def bench_cli(package_path: Path) -> Cli:
    """``bench_cli("--quick", ...)`` runs the benchmark program, as ``cli`` runs a command."""
    return _runner(package_path, BENCH_MODULE)


BENCH_MODULE = "a0_reranker.bench"
BENCH_PROG = f"python -m {BENCH_MODULE}"  # how its lines name it


def _runner(package_path: Path, module: str) -> Cli:
    def run(*args: str | bytes, input: str | None = None, env: dict[str, str] | None = None,
            path: tuple[Path, ...] = (), timeout: float = 60,
            stdin_closed: bool = False) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", module, *args]
        if stdin_closed:  # the shell closes file descriptor 0 before Python starts
            command = ["sh", "-c", 'exec "$@" 0<&-', "sh", *command]
        return subprocess.run(command, input=input, env=cli_env(package_path, env, path),
                              capture_output=True, text=True, timeout=timeout, check=False)

    return run


@pytest.fixture(scope="session")
def start_cli(package_path: Path) -> Callable[..., subprocess.Popen[str]]:
    """``start_cli(*args)`` starts the command without waiting, its stdout and stderr piped."""

    def start(*args: str, module: str = "a0_reranker") -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", module, *args], env=cli_env(package_path),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    return start


def cli_env(package_path: Path, env: dict[str, str] | None = None, path: tuple[Path, ...] = ()) -> dict[str, str]:
    """The child's environment: this package on its path, strict UTF-8 output, no inherited test keys, and no
    terminal size (pytest-xdist's workers set COLUMNS=80): the output is a pipe's, 100 columns wide."""
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith(("PYTHON", "A0_TEST_KEY")) and k not in ("COLUMNS", "LINES")}
    child_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (*path, package_path))
    child_env["PYTHONIOENCODING"] = "utf-8"
    child_env.update(env or {})
    return child_env


@pytest.fixture(scope="module")
def infinity() -> Iterator[RunningServer]:
    with serve_in_thread("infinity") as server:
        yield server


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    return lines[0]


@pytest.fixture(scope="session")
def one_error_line() -> Callable[[subprocess.CompletedProcess[str]], str]:
    """The contract for user errors: one line on stderr (returned), nothing on stdout, no traceback."""
    return _one_error_line


@pytest.fixture
def unused_port() -> int:
    """A port nothing listens on (handed out by ``support.ports``, then released)."""
    return fresh_port()
