"""Install, uninstall and update as ``hooks.py`` runs them, and wrapping the memory search at startup and for each
new agent (state: none). A failed pip install's error, A0's only explanation, names each requirement and the
command to run. An update in place purges no module, so ``pre_update`` unwraps, stops and drops our modules, and
``install`` wraps with the pulled code. Imports only the stdlib and PyYAML (A0 ships it)."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import itertools
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from ..process import singletons
from . import PLUGIN_NAME, memory_patch, recall_entry

log = logging.getLogger("a0_reranker")

PACKAGE: Final = __name__.rsplit(".", 2)[0]  # usr.plugins.a0_reranker
REQUIREMENTS_FILE: Final = Path(__file__).resolve().parent.parent / "requirements.txt"
PIP_TIMEOUT_S: Final = 600
IMPORT_NAMES: Final = {"pyyaml": "yaml", "async-lru": "async_lru"}  # distribution -> import name, where they differ
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:>=\s*([0-9][0-9.]*))?")

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class DependencyInstallError(RuntimeError):
    """pip could not install these requirements; the message names them, pip's reason and the command."""

    def __init__(self, reasons: dict[str, str], command: str) -> None:
        names = ", ".join(f"{requirement} ({reason})" for requirement, reason in reasons.items())
        noun, pronoun = ("dependency", "it") if len(reasons) == 1 else ("dependencies", "them")
        super().__init__(f"a0_reranker could not install its {noun} {names}. Install {pronoun} in Agent Zero's "
                         f"Python, then install the plugin again: {command}")


def install(run: Runner = subprocess.run) -> None:
    """Make every requirement importable (or raise ``DependencyInstallError``), then wrap the memory search."""
    pip_install(missing_requirements(REQUIREMENTS_FILE), run=run)
    if installed():
        recall_entry.ensure_installed()


def installed() -> bool:
    """The plugin folder is still there (a manual ``rm -rf`` calls no hook)."""
    return recall_entry.from_a0(False, "the plugin folder",
                                lambda plugins: plugins.find_plugin_dir(PLUGIN_NAME) is not None)


def wrap(seam: str) -> None:
    """Wrap the memory search at startup and for every new agent; A0 does not catch what extensions raise."""
    try:
        if installed():
            recall_entry.ensure_installed()
    except Exception:
        log.exception("a0_reranker: could not wrap the memory search at %s", seam)


def uninstall() -> None:
    """Restore the memory search, stop our runtime (thread, HTTP session) and retire this code, so a recall
    still running in it returns stock and starts no runtime a later install would find."""
    log.info("a0_reranker: memory search restored on %d class(es)", memory_patch.uninstall())
    try:
        runtime = importlib.import_module(PACKAGE + ".service.runtime")
    except Exception:  # dependencies missing: nothing of ours can be running
        runtime = None
    if runtime is not None:
        _stopping(runtime.shutdown)
    started = singletons.forget_all().get("runtime")  # from here on this code starts nothing
    if runtime is not None and started is not None:  # a recall started one while the first was stopping
        _stopping(lambda: runtime.stop(started))


def _stopping(stop: Callable[[], None]) -> None:
    try:
        stop()
    except Exception:
        log.exception("a0_reranker: error while stopping the reranker runtime")


def pre_update() -> None:
    """Before ``git pull``: unwrap, stop and forget the old code, so A0 imports the new code after the pull."""
    uninstall()
    ours = [name for name in list(sys.modules) if name == PACKAGE or name.startswith(PACKAGE + ".")]
    for name in ours:  # the next import reads the files on disk
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    # A0 keeps our extensions' classes, which hold the code just retired: when the pull then fails, A0 clears
    # nothing, and that code would run every recall stock until a restart. Cleared now, they load what is on disk.
    recall_entry.from_a0(None, "the extension caches", lambda plugins: plugins.after_plugin_change([PLUGIN_NAME]))
    log.info("a0_reranker: %d module(s) dropped for the update", len(ours))


def missing_requirements(path: Path) -> list[str]:
    """The requirement lines of ``path`` that are not importable (or older than their ``>=`` bound)."""
    texts = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [text for text in texts if (match := _REQUIREMENT.match(text)) and not _satisfied(*match.groups())]


def _satisfied(name: str, minimum: str | None) -> bool:
    module = IMPORT_NAMES.get(name.lower(), name.lower().replace("-", "_"))
    try:
        if importlib.util.find_spec(module) is None:
            return False
        return minimum is None or _version_tuple(importlib.metadata.version(name)) >= _version_tuple(minimum)
    except importlib.metadata.PackageNotFoundError:  # an ImportError too: caught first
        return True  # importable but not pip-managed (vendored): trust it
    except (ImportError, ValueError):
        return False


def _version_tuple(version: str) -> tuple[int, ...]:
    digits = itertools.takewhile(bool, (re.match(r"\d+", piece) for piece in version.split(".")))
    return tuple(int(match.group()) for match in digits if match)


def pip_install(requirements: Sequence[str], run: Runner = subprocess.run) -> None:
    """Install each requirement on its own into the interpreter A0 runs on, so a failure names it."""
    reasons = {r: reason for r in requirements if (reason := _install_one(r, run)) is not None}
    importlib.invalidate_caches()
    if reasons:
        raise DependencyInstallError(reasons, shlex.join(install_command(list(reasons))))


def _install_one(requirement: str, run: Runner) -> str | None:
    """None when it was installed, otherwise pip's own reason in one line. Never raises."""
    log.info("a0_reranker: installing %s", requirement)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        result: Any = run(install_command([requirement]), capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
                          check=False, env=env)
    except subprocess.TimeoutExpired:
        return f"pip did not finish within {PIP_TIMEOUT_S} s"
    except OSError as exc:
        return f"pip could not be started: {exc.strerror or exc}"
    if result.returncode == 0:
        return None
    # pip's last ``ERROR:`` line names the cause
    lines = [line.strip() for line in (result.stderr or result.stdout or "").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return f"exit {result.returncode}: {(errors or lines or ['no output'])[-1]}"


def install_command(requirements: list[str]) -> list[str]:
    """pip of the interpreter A0 runs on (``sys.executable``); uv if that environment has no pip."""
    if importlib.util.find_spec("pip") is None and (uv := shutil.which("uv")):
        return [uv, "pip", "install", "--python", sys.executable, *requirements]
    return [sys.executable, "-m", "pip", "install", *requirements]
