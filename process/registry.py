"""What is one per process, kept where A0's module purges cannot split it, and rebuilt after ``fork``.

A0 drops every ``usr.plugins.*`` module from ``sys.modules`` when a plugin is installed or deleted or
an extension file changes; the next import builds fresh module objects. State kept in a module global
would then split in two: the memory wrapper installed earlier would read the old copy while our
freshly imported extensions write the new one. So each such object lives in one anchor module under a
name outside ``usr.plugins``, and is reached through a typed ``PerProcess`` declared where it is used:

    STATS: Final = PerProcess("stats", StatsRecorder)
    STATS.get()  # the process's one recorder, created on first use

A forked child finds an empty anchor: the parent's threads (the owner loop) do not exist there.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Final, Generic, TypeVar, cast

ANCHOR_MODULE: Final = "_a0_reranker_process_state"
T = TypeVar("T")


class _Anchor(types.ModuleType):
    """The one module, outside ``usr.plugins``, that holds the process-wide objects."""

    def __init__(self) -> None:
        super().__init__(ANCHOR_MODULE, "a0_reranker's process-wide state (see process/registry.py)")
        self.lock = threading.RLock()
        self.values: dict[str, object] = {}
        self.pid = os.getpid()

    def reset(self) -> None:
        self.lock = threading.RLock()
        self.values = {}
        self.pid = os.getpid()


def _anchor() -> _Anchor:
    module = sys.modules.get(ANCHOR_MODULE)
    if module is None:
        fresh = _Anchor()
        module = sys.modules.setdefault(ANCHOR_MODULE, fresh)  # atomic: one anchor even if threads race
        if module is fresh and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forget_after_fork)
    anchor = cast(_Anchor, module)  # made by this module or by an earlier copy of it (the same shape)
    if anchor.pid != os.getpid():  # forked without the at-fork hook having run
        anchor.reset()
    return anchor


def forget_all() -> None:
    """Drop every process-wide object. Before an update in place replaces our code: the new modules must make
    their own objects (counters, scope variable, locks), not use ones built by the old classes."""
    anchor = _anchor()
    with anchor.lock:
        anchor.values.clear()


def _forget_after_fork() -> None:
    module = sys.modules.get(ANCHOR_MODULE)
    if module is not None:
        cast(_Anchor, module).reset()


class PerProcess(Generic[T]):
    """One process-wide object of type ``T``, made by ``factory`` on first use."""

    def __init__(self, name: str, factory: Callable[[], T]) -> None:
        self.name = name
        self._factory = factory

    def get(self) -> T:
        return self.get_or_put(self._factory)

    def get_or_put(self, factory: Callable[[], T]) -> T:
        """The object, made by ``factory`` (instead of its own factory) if there is none yet."""
        anchor = _anchor()
        with anchor.lock:
            if self.name not in anchor.values:
                anchor.values[self.name] = factory()
            return cast(T, anchor.values[self.name])

    def peek(self) -> T | None:
        """The object if it exists, without making it."""
        anchor = _anchor()
        with anchor.lock:
            return cast("T | None", anchor.values.get(self.name))

    def discard(self) -> T | None:
        """Remove and return the object (shutdown and tests use this to start afresh)."""
        anchor = _anchor()
        with anchor.lock:
            return cast("T | None", anchor.values.pop(self.name, None))
