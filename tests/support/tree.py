"""The repository's own files, as the tests that read the source walk them: what git tracks, plus new
files it does not ignore. Build output (``pip install .`` leaves ``build/lib/...``), virtual
environments, caches and downloaded thumbnails are ignored by ``.gitignore``, so they are never read
as part of the plugin.

Outside a git checkout (an unpacked archive) the walk skips what ``.gitignore``'s patterns name.
"""

from __future__ import annotations

import fnmatch
import functools
import shutil
import subprocess
from pathlib import Path

from .a0_layout import REPO_ROOT


def repository_files(root: Path = REPO_ROOT) -> tuple[Path, ...]:
    """Every file of the tree that git would check in, relative to ``root``, sorted."""
    return _repository_files(root.resolve())


@functools.cache
def _repository_files(root: Path) -> tuple[Path, ...]:
    listed = _git_listed(root)
    if listed is None:
        listed = _walked(root, _ignore_patterns(root))
    return tuple(sorted(path for path in listed if (root / path).is_file()))


def files_under(folder: str, suffix: str, root: Path = REPO_ROOT) -> list[Path]:
    """The repository's files under ``folder`` ("" for the top level only) ending in ``suffix``."""
    if not folder:
        return [path for path in repository_files(root) if len(path.parts) == 1 and path.name.endswith(suffix)]
    return [path for path in repository_files(root) if path.parts[0] == folder and path.name.endswith(suffix)]


def _git_listed(root: Path) -> list[Path] | None:
    """Tracked files and untracked ones git does not ignore; None when ``root`` is no git work tree."""
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return None
    done = subprocess.run([git, "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=root,
                          capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        return None
    return [Path(name) for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def _ignore_patterns(root: Path) -> list[str]:
    gitignore = root / ".gitignore"
    lines = gitignore.read_text(encoding="utf-8").splitlines() if gitignore.is_file() else []
    return [".git", *(line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#"))]


def _walked(root: Path, patterns: list[str]) -> list[Path]:
    """Every file whose path has no part matching one of ``patterns`` (the simple .gitignore forms)."""
    found = []
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if not any(fnmatch.fnmatch(part, pattern) for part in relative.parts for pattern in patterns):
            found.append(relative)
    return found
