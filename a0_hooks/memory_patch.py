"""Wrap ``Memory.search_similarity_threshold`` (a plain async method in A0: no seam to hook).

The wrapper is deliberately thin and stable: on every call it looks up the current recall code by
module name and hands it the original method. So a wrapper installed before A0 purged our modules
keeps working with the code imported after the purge, and if our code can no longer be imported
(the plugin folder was deleted), it simply calls the original.

``ensure_installed`` is idempotent and cheap; our seams call it at startup, for every new agent and
before every recall. It wraps the ``Memory`` class A0 uses now (a purge of the ``plugins`` namespace
creates a new one), and replaces a wrapper made by an older copy of this module, keeping the
original it wrapped. ``uninstall`` puts the original back on every class we patched, and gives
their stores back their own query embedding (``query_embedding``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final

from ..process.singletons import PerProcess
from . import query_embedding

log = logging.getLogger("a0_reranker")

MEMORY_MODULE: Final = "plugins._memory.helpers.memory"
METHOD: Final = "search_similarity_threshold"
MARKER: Final = "__a0_reranker_wrapper__"
WRAPPER_CODE_NAME: Final = "_a0_reranker_search"  # co_name survives functools.wraps: how we know our own
RECALL_MODULE: Final = __name__.rsplit(".", 1)[0] + ".recall_search"

_THIS_COPY: Final = object()  # identity of this module copy: a wrapper carrying another one is stale

SearchMethod = Callable[..., Any]


def make_wrapper(original: SearchMethod) -> SearchMethod:
    """An async method with the original's name and signature that routes through our recall code."""
    recall_module = RECALL_MODULE
    warned: list[bool] = []  # log a missing recall module once per wrapper, not on every search

    async def _a0_reranker_search(self: Any, *args: Any, **kwargs: Any) -> Any:
        recall = _recall_code(recall_module, warned)
        if recall is None:
            return await original(self, *args, **kwargs)
        return await recall.search(original, self, args, kwargs)

    wrapper = functools.update_wrapper(_a0_reranker_search, original, updated=())
    setattr(wrapper, MARKER, _THIS_COPY)
    return wrapper


def _recall_code(name: str, warned: list[bool]) -> Any | None:
    """The recall module as it is imported now, or None if it cannot be (plugin gone, deps missing)."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    try:
        return importlib.import_module(name)
    except Exception:
        if not warned:
            warned.append(True)
            log.warning("a0_reranker: recall code unavailable, memory search runs stock", exc_info=True)
        return None


def is_ours(func: Any) -> bool:
    """A wrapper made by any copy of this module (another plugin's ``functools.wraps`` copy is not)."""
    code = getattr(func, "__code__", None)
    return hasattr(func, MARKER) and getattr(code, "co_name", "") == WRAPPER_CODE_NAME


def is_current(func: Any) -> bool:
    """A wrapper made by this very copy of the module."""
    return is_ours(func) and getattr(func, MARKER) is _THIS_COPY


def memory_class() -> type | None:
    """A0's ``Memory`` class as imported now, or None outside A0."""
    try:
        module = importlib.import_module(MEMORY_MODULE)
    except Exception:
        return None
    found = getattr(module, "Memory", None)
    return found if isinstance(found, type) else None


_LOCK: Final[PerProcess[threading.Lock]] = PerProcess("memory_patch_lock", threading.Lock)
_PATCHED: Final[PerProcess[weakref.WeakSet[type]]] = PerProcess("memory_patch_classes", weakref.WeakSet)


def _lock() -> threading.Lock:
    return _LOCK.get()


def _patched() -> weakref.WeakSet[type]:
    """Every Memory class we wrapped in this process (old ones too, for uninstall)."""
    return _PATCHED.get()


def ensure_installed() -> bool:
    """Wrap the current ``Memory`` class unless this copy's wrapper is already on top. True when it is."""
    cls = memory_class()
    if cls is None:
        return False
    with _lock():
        current = getattr(cls, METHOD, None)
        if current is None:
            return False
        if is_current(current):
            return True
        if _ours_below_top(current):
            return True  # another wrapper sits on ours; ours re-resolves its code on every call
        original = current.__wrapped__ if is_ours(current) else current
        setattr(cls, METHOD, make_wrapper(original))
        _patched().add(cls)
    return True


def _ours_below_top(func: Any) -> bool:
    """Another plugin wrapped on top of a wrapper of ours: leave the chain alone."""
    if is_ours(func):
        return False
    seen = 0
    inner = getattr(func, "__wrapped__", None)
    while inner is not None and seen < 32:
        if is_ours(inner):
            return True
        inner, seen = getattr(inner, "__wrapped__", None), seen + 1
    return False


def is_installed() -> bool:
    """The ``Memory`` class A0 uses now goes through a wrapper of ours."""
    cls = memory_class()
    current = getattr(cls, METHOD, None) if cls is not None else None
    return current is not None and (is_ours(current) or _ours_below_top(current))


def uninstall() -> int:
    """Put the original method back wherever ours is on top; returns how many classes were restored."""
    restored = 0
    with _lock():
        classes = set(_patched())
        current_class = memory_class()
        if current_class is not None:
            classes.add(current_class)
        for cls in classes:
            current = getattr(cls, METHOD, None)
            if is_ours(current):
                setattr(cls, METHOD, _innermost_original(current))
                restored += 1
            query_embedding.untap(_stores(cls))
            _patched().discard(cls)
    return restored


def _stores(cls: type) -> list[Any]:
    """The stores a ``Memory`` class holds (one per memory subdir), read defensively."""
    index = getattr(cls, "index", None)
    return list(index.values()) if isinstance(index, dict) else []


def _innermost_original(func: Any) -> Any:
    """Unwrap consecutive wrappers of ours (a stale one under a current one never happens, but be sure)."""
    while is_ours(func):
        func = func.__wrapped__
    return func
