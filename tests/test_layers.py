"""Imports point down: ``core`` <- ``batching`` <- ``service`` <- ``a0_hooks`` <- A0's thin entry
points, with the command line, its demo server and the benches beside the A0 side, and the process-wide
infrastructure (``process/``: the owner loop, the singletons) in a room of its own that only ``service`` and
``a0_hooks`` use; and only ``a0_hooks/`` and the entry points know A0.

Read from the source with ``ast``, nothing imported: every ``import`` and ``from ... import`` (also under
``TYPE_CHECKING`` and inside functions), relative ones resolved against their package, and the
``importlib.import_module`` calls whose name the file spells out (a string, or an f-string of the file's own
string constants). A new top-level package fails until it is given its place in ``MAY_IMPORT``.
"""

from __future__ import annotations

import ast
import functools
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from support.tree import repository_files

REPO: Final = Path(__file__).resolve().parents[1]
OWN_NAMES: Final = ("a0_reranker", "usr.plugins.a0_reranker")  # standalone, and as A0 imports the plugin
ROOT: Final = "root"  # the package's own ``__init__`` (``__version__``)

# What each part of the tree may import of the plugin itself.
MAY_IMPORT: Final[Mapping[str, frozenset[str]]] = {
    "process": frozenset({"process"}),  # infrastructure, knowing nothing of reranking
    "core": frozenset({"core"}),
    "batching": frozenset({"core", "batching"}),
    "service": frozenset({ROOT, "core", "batching", "process", "service"}),
    "a0_hooks": frozenset({ROOT, "core", "process", "service", "a0_hooks"}),
    # A0's entry points, loaded by A0 by path or by name; helpers/ is the import path other plugins use
    "hooks.py": frozenset({"a0_hooks"}),
    "api": frozenset({"a0_hooks"}),
    "extensions": frozenset({"a0_hooks"}),
    "tools": frozenset({"a0_hooks"}),
    "helpers": frozenset({ROOT, "core", "service", "a0_hooks"}),
    # beside the A0 side: the command line and its demo server; the developers' benchmarks (not shipped)
    # use the command line's parts, and nothing shipped imports them
    "demo": frozenset({"core", "demo"}),
    "cli": frozenset({ROOT, "core", "batching", "service", "demo", "cli"}),
    "bench": frozenset({ROOT, "core", "batching", "service", "demo", "cli", "bench"}),
    "__main__.py": frozenset({"cli"}),
    "__init__.py": frozenset(),
    "scripts": frozenset(),
    "setup.py": frozenset(),  # the build's options, read by setuptools only
}
KNOWS_A0: Final = frozenset({"a0_hooks", "hooks.py", "api", "extensions", "tools", "helpers"})
# A0's own top-level packages and modules, other plugins (``usr.*``) and what only A0's environment has.
A0_MODULES: Final = frozenset({"agent", "initialize", "models", "helpers", "plugins", "python", "tools", "api",
                               "extensions", "usr", "langchain_core", "langchain_community", "faiss"})
# Files that reach past their layer on purpose, and why. Each must still need its exemption.
EXEMPT: Final[Mapping[str, str]] = {
    "bench/recall_pool_cost.py": "drives the A0 stand-in from a checkout (tests/ on sys.path) to time a recall "
                                 "through A0's own memory flow and the recall scope; the plugin never imports it",
}
SKIPPED_DIRS: Final = frozenset({"tests", ".git", "__pycache__", "node_modules"})


@dataclass(frozen=True)
class Imported:
    """One module a file imports, where: ``part`` is the plugin's top-level part, or None for another package."""

    file: str
    line: int
    module: str
    part: str | None

    @property
    def is_a0(self) -> bool:
        return self.part is None and self.module.split(".")[0] in A0_MODULES

    def __str__(self) -> str:
        return f"{self.file}:{self.line} imports {self.module}"


def part_of(relative: Path) -> str:
    return relative.parts[0]


def module_path(relative: Path) -> tuple[list[str], list[str]]:
    """The file's module name as parts under ``a0_reranker``, and the package its relative imports start from."""
    parts = ["a0_reranker", *relative.with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
        return parts, parts
    return parts, parts[:-1]


def own_part(module: str, top_parts: frozenset[str]) -> str | None:
    """The plugin's top-level part ``module`` lies in (``ROOT`` for the package itself), or None."""
    for own in OWN_NAMES:
        if module == own:
            return ROOT
        if module.startswith(own + "."):
            first = module[len(own) + 1 :].split(".")[0]
            return first if first in top_parts or f"{first}.py" in top_parts else ROOT
    return None


def string_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` bindings, for the f-strings of ``import_module`` calls."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    found[target.id] = node.value.value
    return found


def spelled_name(node: ast.expr, constants: Mapping[str, str]) -> str | None:
    """The module name an ``import_module`` argument spells out, or None when only running code knows it."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if not isinstance(node, ast.JoinedStr):
        return None
    pieces = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            pieces.append(value.value)
        elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) \
                and value.value.id in constants:
            pieces.append(constants[value.value.id])
        else:
            return None
    return "".join(pieces)


def imported_names(tree: ast.Module, package: list[str]) -> Iterator[tuple[int, str]]:
    """``(line, absolute module name)`` for every import in ``tree``; ``from X import y`` yields X and X.y
    (``y`` may be a submodule: ``from .. import service``)."""
    constants = string_constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            yield node.lineno, source
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{source}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args and _calls_import_module(node.func):
            name = spelled_name(node.args[0], constants)
            if name is not None:
                yield node.lineno, name


def _calls_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
        (isinstance(func, ast.Name) and func.id in {"import_module", "__import__"})


def imports_of(relative: Path, source: str, top_parts: frozenset[str]) -> list[Imported]:
    _, package = module_path(relative)
    tree = ast.parse(source, filename=str(relative))
    found = {(line, name) for line, name in imported_names(tree, package)}
    return [Imported(relative.as_posix(), line, name, own_part(name, top_parts)) for line, name in sorted(found)]


@functools.cache
def source_files() -> tuple[Path, ...]:
    """Every Python file of the plugin's tree that git would check in, but the tests: build output (``build/lib``
    after ``pip install .``), virtual environments and caches are what git ignores, and no part of the plugin."""
    return tuple(path for path in repository_files(REPO) if path.suffix == ".py" and not set(path.parts) & SKIPPED_DIRS)


def top_parts() -> frozenset[str]:
    return frozenset(part_of(path) for path in source_files())


@functools.cache
def all_imports() -> tuple[Imported, ...]:
    parts = top_parts()
    return tuple(imported for path in source_files()
                 for imported in imports_of(path, (REPO / path).read_text(encoding="utf-8"), parts))


def upward(imported: Imported) -> bool:
    return imported.part is not None and imported.part not in MAY_IMPORT[part_of(Path(imported.file))]


def crosses_a_layer(imported: Imported) -> bool:
    """Up a layer, or into A0 (or the tests' stand-in) from outside the A0 side."""
    outside_a0_side = part_of(Path(imported.file)) not in KNOWS_A0
    return upward(imported) or (outside_a0_side and (imported.is_a0 or imported.module.startswith("support")))


# --- the tree as it is -------------------------------------------------------------------------------


def test_every_part_of_the_tree_has_its_place_in_the_layers() -> None:
    assert top_parts() <= set(MAY_IMPORT), f"give these a row in MAY_IMPORT: {sorted(top_parts() - set(MAY_IMPORT))}"


@pytest.mark.parametrize("part", sorted(MAY_IMPORT))
def test_imports_point_down(part: str) -> None:
    wrong = [str(i) for i in all_imports() if part_of(Path(i.file)) == part and upward(i) and i.file not in EXEMPT]
    assert not wrong, f"{part} may import only {sorted(MAY_IMPORT[part])} of the plugin:\n" + "\n".join(wrong)


def test_only_a0_hooks_and_the_entry_points_import_a0() -> None:
    wrong = [str(i) for i in all_imports()
             if i.file not in EXEMPT and part_of(Path(i.file)) not in KNOWS_A0 and i.is_a0]
    assert not wrong, "only a0_hooks/ and A0's entry points may know A0:\n" + "\n".join(wrong)


def test_core_and_batching_import_nothing_above_them_and_know_no_a0() -> None:
    """The three rules of issue 13, spelled out on their own (MAY_IMPORT implies them); neither imports the
    process infrastructure either."""
    imports = all_imports()
    above_core = {"batching", "service", "a0_hooks", "cli", "helpers", "api", "extensions", "demo", "bench", "tools",
                  "process"}
    assert not [str(i) for i in imports if part_of(Path(i.file)) == "core" and (i.part in above_core or i.is_a0)]
    assert not [str(i) for i in imports if part_of(Path(i.file)) == "batching"
                and (i.part in above_core - {"batching"} or i.is_a0)]


# What reads or writes files, sockets or processes: ``core`` is pure, so its modules use none of it.
IO_MODULES: Final = frozenset({"aiohttp", "yaml", "socket", "ssl", "subprocess", "urllib.request", "http", "io",
                               "shutil", "tempfile"})
IO_CALLS: Final = frozenset({"open", "read_text", "read_bytes", "write_text", "write_bytes"})


def test_core_does_no_io() -> None:
    """``core`` builds requests and reads answers as data; the A0 side reads the settings file."""
    imports = [str(i) for i in all_imports() if part_of(Path(i.file)) == "core" and i.module in IO_MODULES]
    calls = [f"{path}:{node.lineno}" for path in source_files() if part_of(path) == "core"
             for node in ast.walk(ast.parse((REPO / path).read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in IO_CALLS]
    assert not imports and not calls, imports + calls


def test_each_exemption_is_still_needed() -> None:
    imports = all_imports()
    for file in EXEMPT:
        assert any(i.file == file and crosses_a_layer(i) for i in imports), f"{file} no longer needs its exemption"


# --- the checker itself: what it must catch ------------------------------------------------------------

PARTS: Final = frozenset(MAY_IMPORT)


def found(file: str, source: str) -> list[Imported]:
    return imports_of(Path(file), source, PARTS)


@pytest.mark.parametrize(("file", "source", "target"), [
    ("core/config.py", "from ..service import runtime\n", "service"),
    ("core/config.py", "from .. import service\n", "service"),
    ("core/dialects/catalog.py", "from ...batching.breaker import CircuitBreaker\n", "batching"),
    ("core/dialects/__init__.py", "from ..errors import RerankError\nfrom ...cli import main\n", "cli"),
    ("batching/batcher.py", "from usr.plugins.a0_reranker.service import runtime\n", "service"),
    ("batching/batcher.py", "import a0_reranker.a0_hooks.recall_entry\n", "a0_hooks"),
    ("batching/batcher.py", "from ..process.singletons import OwnerLoop\n", "process"),
    ("a0_hooks/recall_entry.py", "from ..batching import breaker\n", "batching"),
    ("process/singletons.py", "from ..core.config import RerankerConfig\n", "core"),
    ("service/runtime.py", "def later():\n    from ..a0_hooks import recall_entry\n", "a0_hooks"),
    ("core/config.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..cli.options import x\n",
     "cli"),
    ("bench/x.py",
     'import importlib\nP = "usr.plugins.a0_reranker"\nimportlib.import_module(f"{P}.a0_hooks.recall_entry")\n',
     "a0_hooks"),
])
def test_the_checker_sees_an_upward_import(file: str, source: str, target: str) -> None:
    imports = found(file, source)
    assert any(i.part == target and upward(i) for i in imports), imports


@pytest.mark.parametrize(("file", "source"), [
    ("service/runtime.py", "import helpers.plugins\n"),
    ("batching/batcher.py", "from plugins._memory.helpers.memory import Memory\n"),
    ("core/config.py", "from python.helpers import files\n"),
    ("cli/main.py", "import agent\n"),
    ("demo/server.py", "from initialize import initialize_agent\n"),
    ("bench/x.py", 'import importlib\nimportlib.import_module("helpers.plugins")\n'),
    ("service/runtime.py", "from usr.plugins.other_plugin.helpers import thing\n"),
])
def test_the_checker_sees_a0_outside_the_a0_side(file: str, source: str) -> None:
    imports = found(file, source)
    assert any(i.is_a0 for i in imports) and part_of(Path(file)) not in KNOWS_A0, imports


@pytest.mark.parametrize(("file", "source"), [
    ("service/runtime.py", "from .. import __version__\nfrom ..core import config\nfrom . import endpoints\n"),
    ("a0_hooks/memory_patch.py", "import helpers.extension\n"),
    ("helpers/reranker.py", "from ..service import runtime\n"),
    ("extensions/python/agent_init/_10_x.py", "from usr.plugins.a0_reranker.a0_hooks import recall_entry\n"),
])
def test_the_checker_lets_a_downward_import_pass(file: str, source: str) -> None:
    imports = found(file, source)
    part = part_of(Path(file))
    assert not [i for i in imports if upward(i) or (part not in KNOWS_A0 and i.is_a0)], imports


def test_the_plugins_own_helpers_are_not_a0s() -> None:
    imports = found("cli/main.py", "from ..helpers import reranker\nimport helpers.plugins\n")
    assert [(i.module, i.is_a0) for i in imports] == [
        ("a0_reranker.helpers", False), ("a0_reranker.helpers.reranker", False), ("helpers.plugins", True)]


# --- which files are the tree: what git has, not what a build leaves ------------------------------------


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, timeout=60)


@pytest.mark.parametrize("checkout", ["git", "unpacked archive"])
def test_the_walk_skips_what_git_ignores(tmp_path: Path, checkout: str) -> None:
    """``pip install .`` leaves ``build/lib/<package>/...``: a copy of the plugin that imports anything.
    The walk reads tracked files and new ones git would track, never what ``.gitignore`` names."""
    (tmp_path / ".gitignore").write_text("build/\n*.egg-info/\n__pycache__/\n", encoding="utf-8")
    for name in ("core/config.py", "build/lib/a0_reranker/core/config.py", "a0_reranker.egg-info/x.py",
                 "core/__pycache__/config.py", "core/new_module.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("from ..service import runtime\n", encoding="utf-8")
    if checkout == "git":
        _git(tmp_path, "init", "-q")
        _git(tmp_path, "add", ".gitignore", "core/config.py")  # core/new_module.py: new, not ignored
    assert repository_files(tmp_path) == (Path(".gitignore"), Path("core/config.py"), Path("core/new_module.py"))


def test_the_trees_python_files_are_gits() -> None:
    assert Path("core/config.py") in source_files() and Path("tests/conftest.py") not in source_files()
    assert not [path for path in source_files() if path.parts[0] in {"build", "dist", ".venv"}]
