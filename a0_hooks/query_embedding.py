"""One query embedding per reranked search: the pool search reuses the vector of A0's own call.

A0's FAISS store embeds the query on every text search, in A0 often through a remote embedding API,
so the pool search would embed the same query a second time, and wait for it. A tap on the store's
query-embedding step (``_aembed_query``, which FAISS awaits before each text search) keeps, for the
span of one reranked search only, the vector A0's own call computed, and gives it to the pool search's
identical request. Outside that span, and for anything but one query string, it calls straight through.

The tap carries its own ContextVar, so the recall code of any module copy (A0 purges ours at runtime)
and of any process (after a fork) uses the one on the store. A store without that step, or one that
takes no attribute, is left alone: its pool search embeds again, within the plugin's deadline.
``untap`` restores the stores when the plugin is uninstalled. Standard library only, like
``memory_patch``, so uninstall works without our dependencies.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

log = logging.getLogger("a0_reranker")

METHOD: Final = "_aembed_query"
TAP_CODE_NAME: Final = "_a0_reranker_embed_query"  # co_name survives functools.wraps: how we know our own
MEMO: Final = "__a0_reranker_query_embedding__"  # on the tap: its ContextVar
OWN: Final = "__a0_reranker_replaced_own__"  # on the tap: the store had its own ``_aembed_query`` before

Vectors = dict[str, Any]  # query text -> the vector A0's own call got for it


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
    current = getattr(store, METHOD, None)
    memo = getattr(current, MEMO, None)
    if isinstance(memo, ContextVar):
        return memo
    if current is None or not inspect.iscoroutinefunction(current):
        return None
    tap = _make_tap(current, replaced_own=METHOD in vars(store))
    setattr(store, METHOD, tap)
    return getattr(tap, MEMO)  # type: ignore[no-any-return]


@contextmanager
def shared(memory: Any) -> Iterator[None]:
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
        tap: Any = getattr(store, "__dict__", {}).get(METHOD)
        if not _is_tap(tap):
            continue  # not tapped, or another wrapper on top of ours: leave it be
        if getattr(tap, OWN, False):
            setattr(store, METHOD, tap.__wrapped__)
        else:
            delattr(store, METHOD)
        untapped += 1
    return untapped
