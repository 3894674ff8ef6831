"""Stand-in only (no A0 counterpart): reset process-wide state and switch between A0 roots in tests.

A0 keeps state at process level: cache areas, `Memory.index`, the `AgentContext` registry, named
event-loop threads, and `sys.modules` itself. `reset_state()` clears it for the active root;
`use_root(root)` makes another root (e.g. one built with `build_a0_root(tmp_path)`) the importable
A0 for a block and restores the previous modules and `sys.path` afterwards.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

#: Top-level names an A0 root provides (the stand-in's modules and the plugin namespaces).
A0_TOP_LEVEL = (
    "agent",
    "initialize",
    "models",
    "faiss",
    "helpers",
    "plugins",
    "usr",
    "tools",
    "extensions",
    "langchain_core",
    "langchain_community",
)


def _is_a0_name(name: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in A0_TOP_LEVEL)


def _is_a0_root(entry: str) -> bool:
    return os.path.isfile(os.path.join(entry or ".", "helpers", "standin.py"))


def reset_state() -> None:
    """Clear caches, `Memory.index`, contexts and loop threads of the root currently imported."""
    from helpers import cache, defer

    defer.shutdown_all()
    cache.clear_all()
    agent_module = sys.modules.get("agent")
    if agent_module is not None:
        agent_module.AgentContext.reset_registry()
    memory_module = sys.modules.get("plugins._memory.helpers.memory")
    if memory_module is not None:
        memory_module.Memory.index.clear()
        memory_module.Memory.save_counts.clear()


def _take_a0_modules() -> dict[str, ModuleType]:
    taken = {name: mod for name, mod in sys.modules.items() if _is_a0_name(name)}
    for name in taken:
        del sys.modules[name]
    return taken


@contextmanager
def use_root(root: Path | str) -> Iterator[Path]:
    """Import A0 from `root` inside the block (fresh modules: new `Memory` class, empty caches).

    On exit the root's loop threads are stopped, its modules dropped, and the previous modules and
    `sys.path` put back, so module objects imported before the block stay the live ones.
    """
    root = Path(os.path.abspath(root))
    saved_path = list(sys.path)
    saved_modules = _take_a0_modules()
    sys.path[:] = [str(root)] + [p for p in saved_path if not _is_a0_root(p)]
    importlib.invalidate_caches()
    try:
        yield root
    finally:
        defer = sys.modules.get("helpers.defer")
        if defer is not None and getattr(defer, "__file__", "").startswith(str(root)):
            defer.shutdown_all()
        _take_a0_modules()
        sys.modules.update(saved_modules)
        sys.path[:] = saved_path
        importlib.invalidate_caches()
