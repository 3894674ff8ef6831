"""Our patches on A0's memory (state: the classes wrapped, the stores tapped): ``Memory.
search_similarity_threshold`` wrapped (a plain async method: no seam to hook), and each store's query
embedding tapped, so that a reranked search embeds its query once. Standard library only, so
``uninstall`` works without our dependencies.

The wrapper is thin and stable: every call looks up the recall code by module name and hands it the
original. A wrapper installed before A0 purged our modules so runs the code imported after the purge,
and calls the original alone once our code cannot be imported (the plugin folder was deleted).
``ensure_installed`` (cheap, idempotent; at startup, per new agent, before every recall) wraps the
``Memory`` class A0 uses now (a purge of ``plugins`` creates a new one) and replaces a wrapper of an
older copy of this module, keeping its original; ``uninstall`` restores every class and untaps its
stores.

The tap: A0's FAISS store embeds the query on every text search, often through a remote API, so the
pool search would embed the same query again, and wait. A tap on the store's ``_aembed_query`` keeps,
for the span of one reranked search (``shared_query_embedding``), the vector A0's own call computed,
and gives it to the pool search's identical request; otherwise it calls straight through. The tap
carries its own ContextVar, so the recall code of any module copy uses the one on the store. A store
without that step, or that takes no attribute, is left alone: its pool search embeds again.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from ..process.singletons import PerProcess

log = logging.getLogger("a0_reranker")

MEMORY_MODULE: Final = "plugins._memory.helpers.memory"
METHOD: Final = "search_similarity_threshold"
MARKER: Final = "__a0_reranker_wrapper__"
WRAPPER_CODE_NAME: Final = "_a0_reranker_search"  # co_name survives functools.wraps: how we know our own
RECALL_MODULE: Final = __name__.rsplit(".", 1)[0] + ".recall_search"
EMBED_METHOD: Final = "_aembed_query"
TAP_CODE_NAME: Final = "_a0_reranker_embed_query"
MEMO: Final = "__a0_reranker_query_embedding__"  # on the tap: its ContextVar
OWN: Final = "__a0_reranker_replaced_own__"  # on the tap: the store had its own ``_aembed_query`` before

_THIS_COPY: Final = object()  # identity of this module copy: a wrapper carrying another one is stale

SearchMethod = Callable[..., Any]
Vectors = dict[str, Any]  # query text -> the vector A0's own call got for it


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
    return hasattr(func, MARKER) and getattr(getattr(func, "__code__", None), "co_name", "") == WRAPPER_CODE_NAME


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


def _patched() -> weakref.WeakSet[type]:  # every Memory class we wrapped (old ones too, for uninstall)
    return _PATCHED.get()


def ensure_installed() -> bool:
    """Wrap the current ``Memory`` class unless this copy's wrapper is already on top. True when it is."""
    cls = memory_class()
    if cls is None:
        return False
    with _LOCK.get():
        current = getattr(cls, METHOD, None)
        if current is None:
            return False
        if is_current(current) or _ours_below_top(current):
            return True  # another wrapper on ours is left alone: ours re-resolves its code on every call
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
    """Put the original method back wherever ours is on top, and untap the stores of every class we
    patched; returns how many classes were restored."""
    restored = 0
    with _LOCK.get():
        classes = set(_patched())
        current_class = memory_class()
        if current_class is not None:
            classes.add(current_class)
        for cls in classes:
            current: Any = getattr(cls, METHOD, None)
            if is_ours(current):
                while is_ours(current):  # a stale wrapper under a current one never happens, but be sure
                    current = current.__wrapped__
                setattr(cls, METHOD, current)
                restored += 1
            index = getattr(cls, "index", None)  # the class's stores, one per memory subdir
            untap(list(index.values()) if isinstance(index, dict) else ())  # a copy: A0 may add a store meanwhile
            _patched().discard(cls)
    return restored


# --- one query embedding per reranked search ---------------------------------------------------------


def _make_tap(embed: Callable[..., Any], replaced_own: bool) -> Callable[..., Any]:
    memo: ContextVar[Vectors | None] = ContextVar("a0_reranker_query_embedding", default=None)

    async def _a0_reranker_embed_query(text: Any, *args: Any, **kwargs: Any) -> Any:
        vectors = memo.get()
        if vectors is None or args or kwargs or not isinstance(text, str):
            return await embed(text, *args, **kwargs)
        if text not in vectors:
            vectors[text] = await embed(text)
        return vectors[text]

    tap = functools.update_wrapper(_a0_reranker_embed_query, embed, updated=())
    setattr(tap, MEMO, memo)
    setattr(tap, OWN, replaced_own)
    return tap


def _is_tap(func: Any) -> bool:
    """A tap made by any copy of this module (another wrapper's ``functools.wraps`` copy is not)."""
    code = getattr(func, "__code__", None)
    return isinstance(getattr(func, MEMO, None), ContextVar) and getattr(code, "co_name", "") == TAP_CODE_NAME


def _memo_of(store: Any) -> ContextVar[Vectors | None] | None:
    """The ContextVar of the tap on ``store``, tapping it first if need be; None where it cannot be."""
    current = getattr(store, EMBED_METHOD, None)
    memo = getattr(current, MEMO, None)
    if isinstance(memo, ContextVar):
        return memo
    if current is None or not inspect.iscoroutinefunction(current):
        return None
    tap = _make_tap(current, replaced_own=EMBED_METHOD in vars(store))
    setattr(store, EMBED_METHOD, tap)
    return getattr(tap, MEMO)  # type: ignore[no-any-return]


@contextmanager
def shared_query_embedding(memory: Any) -> Iterator[None]:
    """Inside the block, the store of ``memory`` embeds each query text once. Never raises of its own."""
    try:
        memo = _memo_of(getattr(memory, "db", None))
    except Exception:  # a store that takes no attribute, or a descriptor that fails: embed as usual
        log.debug("a0_reranker: cannot share the query embedding on this store", exc_info=True)
        memo = None
    if memo is None:
        yield
        return
    token = memo.set({})
    try:
        yield
    finally:
        memo.reset(token)


def untap(stores: Iterable[Any]) -> int:
    """Give these stores back their own query embedding (uninstall); returns how many were tapped."""
    untapped = 0
    for store in stores:
        tap: Any = getattr(store, "__dict__", {}).get(EMBED_METHOD)
        if not _is_tap(tap):
            continue  # not tapped, or another wrapper on top of ours: leave it be
        if getattr(tap, OWN, False):
            setattr(store, EMBED_METHOD, tap.__wrapped__)
        else:
            delattr(store, EMBED_METHOD)
        untapped += 1
    return untapped
