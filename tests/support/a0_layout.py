"""Build the folder layout A0 gives a user plugin: ``<root>/usr/plugins/a0_reranker`` -> this repo.

Tests import the plugin exactly as A0 does (``usr.plugins.a0_reranker...``). The A0 stand-in
(``tests/a0_standin``), when present, is copied into the same root so that its top-level packages
(``helpers``, ``plugins``, ``agent`` ...) are importable beside ``usr``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
STANDIN_SOURCE = REPO_ROOT / "tests" / "a0_standin"
PLUGIN_NAME = "a0_reranker"


def build_a0_root(base: Path | None = None) -> Path:
    """Create an A0-like root with the plugin linked in; return the root."""
    root = Path(base or tempfile.mkdtemp(prefix="a0root-"))
    plugins = root / "usr" / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    link = plugins / PLUGIN_NAME
    if not link.exists():
        link.symlink_to(REPO_ROOT, target_is_directory=True)
    if STANDIN_SOURCE.is_dir():
        shutil.copytree(STANDIN_SOURCE, root, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    return root


def install_on_sys_path(root: Path) -> None:
    """Put the A0 root first on sys.path, as A0's own working directory is."""
    text = str(root)
    if text not in sys.path:
        sys.path.insert(0, text)


_NOT_IN_OVERLAY = {"tests", "bench", "docs", "__pycache__", "config.json", "execute_record.json", "state"}


def build_overlay_root(base: Path) -> Path:
    """An A0 root whose plugin folder is a real directory of links to each repository entry.

    Files a test makes A0 write into the plugin folder (``config.json``, ``.toggle-*``) and an
    uninstall's delete then stay in the temporary root instead of touching the working tree.
    """
    root = build_a0_root(base)
    plugin = root / "usr" / "plugins" / PLUGIN_NAME
    plugin.unlink()
    plugin.mkdir()
    for entry in REPO_ROOT.iterdir():
        if entry.name.startswith(".") or entry.name in _NOT_IN_OVERLAY:
            continue
        (plugin / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return root


def plugin_repository(dest: Path) -> Path:
    """A git repository holding what a commit of this working tree would hold (tests, docs and bench
    left out), committed on ``main``: an upstream for A0's installer to clone and pull from."""
    listed = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
                             "-z"], capture_output=True, text=True, timeout=30, check=True).stdout.split("\0")
    for rel in filter(None, listed):
        source = REPO_ROOT / rel
        if rel.split("/", 1)[0] in _NOT_IN_OVERLAY or not source.is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / rel)
    commit_all(dest, "plugin", init=True)
    return dest


def commit_all(repo: Path, message: str, *, init: bool = False) -> None:
    """``git add -A && git commit`` in ``repo`` (``git init -b main`` first when ``init``)."""
    steps = [["init", "-q", "-b", "main"]] if init else []
    steps += [["add", "-A"], ["-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-q",
                              "-m", message]]
    for step in steps:
        subprocess.run(["git", "-C", str(repo), *step], capture_output=True, text=True, timeout=30, check=True)
