"""Process-wide state that survives A0's module purges and is rebuilt after ``fork``.

A0 drops every ``usr.plugins.*`` module from ``sys.modules`` when a plugin is installed or deleted
or an extension file changes; the next import builds fresh module objects. State kept in a module
global would then split in two: the memory wrapper installed earlier would read the old copy while
our extensions write the new one. So everything that must be one per process (the owner loop, the
counters, the recall scope) lives in a registry module under a name outside ``usr.plugins``.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, TypeVar

ANCHOR_MODULE = "_a0_reranker_process_state"
T = TypeVar("T")


def _anchor() -> types.ModuleType:
    module = sys.modules.get(ANCHOR_MODULE)
    if module is None:
        fresh = types.ModuleType(ANCHOR_MODULE, "a0_reranker's process-wide state (see batching/process_state.py)")
        fresh.lock = threading.RLock()  # type: ignore[attr-defined]
        fresh.values = {}  # type: ignore[attr-defined]
        fresh.pid = os.getpid()  # type: ignore[attr-defined]
        module = sys.modules.setdefault(ANCHOR_MODULE, fresh)  # atomic: one anchor even if threads race
        if module is fresh and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forget_after_fork)
    return module


def _forget_after_fork() -> None:
    """In a forked child the parent's threads do not exist: start from scratch."""
    module = sys.modules.get(ANCHOR_MODULE)
    if module is not None:
        module.lock = threading.RLock()  # type: ignore[attr-defined]
        module.values = {}  # type: ignore[attr-defined]
        module.pid = os.getpid()  # type: ignore[attr-defined]


def shared(name: str, factory: Callable[[], T]) -> T:
    """The process's one ``name`` object, created by ``factory`` on first use."""
    anchor = _anchor()
    with anchor.lock:
        if anchor.pid != os.getpid():  # forked without the at-fork hook having run
            _forget_after_fork()
            anchor = _anchor()
        values: dict[str, Any] = anchor.values
        if name not in values:
            values[name] = factory()
        return values[name]  # type: ignore[no-any-return]


def peek(name: str) -> Any | None:
    """The object if it exists, without creating it."""
    anchor = _anchor()
    with anchor.lock:
        return anchor.values.get(name) if anchor.pid == os.getpid() else None


def discard(name: str) -> Any | None:
    """Remove and return ``name`` (tests and shutdown use this to start fresh)."""
    anchor = _anchor()
    with anchor.lock:
        return anchor.values.pop(name, None)
