"""Putting ``recall_entry``'s wrapper on ``Memory.search_similarity_threshold``, and it and the store taps off
(state: the classes wrapped). Stdlib only, so ``uninstall`` needs none of our dependencies. A purge makes a new
class or code copy: ``install`` replaces an older copy's wrapper, keeping its original. Ours are known by a marker
and their code's name, which survives ``functools.wraps`` (another plugin copying our attributes is not ours)."""

from __future__ import annotations

import importlib
import threading
import weakref
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any, Final

from ..process.singletons import PerProcess

MEMORY_MODULE: Final = "plugins._memory.helpers.memory"
METHOD: Final = "search_similarity_threshold"
MARKER: Final = "__a0_reranker_wrapper__"  # on the wrapper: the module copy that made it
WRAPPER_CODE_NAME: Final = "_a0_reranker_search"
EMBED_METHOD: Final = "_aembed_query"
TAP_CODE_NAME: Final = "_a0_reranker_embed_query"
MEMO: Final = "__a0_reranker_query_embedding__"  # on the tap: its ContextVar
OWN: Final = "__a0_reranker_replaced_own__"  # on the tap: the store had its own ``_aembed_query`` before

_LOCK: Final[PerProcess[threading.Lock]] = PerProcess("memory_patch_lock", threading.Lock)
# every Memory class we wrapped (old ones too, for uninstall)
_PATCHED: Final[PerProcess[weakref.WeakSet[type]]] = PerProcess("memory_patch_classes", weakref.WeakSet)


def memory_class() -> type | None:
    try:
        module = importlib.import_module(MEMORY_MODULE)
    except Exception:
        return None
    found = getattr(module, "Memory", None)
    return found if isinstance(found, type) else None


def is_ours(func: Any) -> bool:
    """A wrapper made by any copy of our code."""
    return hasattr(func, MARKER) and getattr(getattr(func, "__code__", None), "co_name", "") == WRAPPER_CODE_NAME


def install(make_wrapper: Callable[[Any], Any], is_current: Callable[[Any], bool]) -> bool:
    """Wrap the current ``Memory`` class unless a current wrapper is on top. True when it is."""
    cls = memory_class()
    with _LOCK.get():
        current = getattr(cls, METHOD, None)
        if cls is None or current is None:
            return False
        if is_current(current) or _ours_below_top(current):
            return True  # another wrapper on ours is left alone: ours re-resolves its code on every call
        original = current.__wrapped__ if is_ours(current) else current
        setattr(cls, METHOD, make_wrapper(original))
        _PATCHED.get().add(cls)
    return True


def _ours_below_top(func: Any) -> bool:
    """Another plugin wrapped on top of a wrapper of ours: leave the chain alone."""
    inner = None if is_ours(func) else getattr(func, "__wrapped__", None)
    for _ in range(32):  # a chain that long is not one of wrappers
        if inner is None or is_ours(inner):
            return inner is not None
        inner = getattr(inner, "__wrapped__", None)
    return False


def is_installed() -> bool:
    current = getattr(memory_class(), METHOD, None)
    return is_ours(current) or _ours_below_top(current)


def uninstall() -> int:
    """Put the original back wherever ours is on top, untap the stores; returns the classes restored."""
    restored = 0
    with _LOCK.get():
        now = memory_class()
        classes = set(_PATCHED.get()) | ({now} if now is not None else set())
        for cls in classes:
            current: Any = getattr(cls, METHOD, None)
            if is_ours(current):
                while is_ours(current):  # a stale wrapper under a current one never happens, but be sure
                    current = current.__wrapped__
                setattr(cls, METHOD, current)
                restored += 1
            index = getattr(cls, "index", None)  # the class's stores, one per memory subdir
            untap(list(index.values()) if isinstance(index, dict) else ())  # a copy: A0 may add a store meanwhile
            _PATCHED.get().discard(cls)
    return restored


def untap(stores: Iterable[Any]) -> int:
    """Give these stores back their own query embedding; returns how many were tapped."""
    untapped = 0
    for store in stores:
        tap: Any = getattr(store, "__dict__", {}).get(EMBED_METHOD)
        code = getattr(tap, "__code__", None)
        if not isinstance(getattr(tap, MEMO, None), ContextVar) or getattr(code, "co_name", "") != TAP_CODE_NAME:
            continue  # not tapped, or another wrapper on top of ours: leave it be
        if getattr(tap, OWN, False):
            setattr(store, EMBED_METHOD, tap.__wrapped__)
        else:
            delattr(store, EMBED_METHOD)
        untapped += 1
    return untapped
