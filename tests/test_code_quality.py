"""The project's tooling, run as part of the suite: ruff (with the ASYNC and B rules) over the
whole tree, and mypy over every package of the plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "batching", "service", "helpers", "a0_hooks", "cli", "demo", "bench")


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", str(REPO)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean(tmp_path: Path) -> None:
    # mypy needs the package under its real name: link the repository as a0_reranker.
    (tmp_path / "a0_reranker").symlink_to(REPO, target_is_directory=True)
    args = [arg for package in PACKAGES for arg in ("-p", f"a0_reranker.{package}")]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / ".mypy_cache"), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
