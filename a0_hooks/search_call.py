"""One call of ``search_similarity_threshold``, read and repeated in the caller's own shape.

A0's callers mix positional and keyword arguments (``delete_documents_by_query`` passes the query
positionally) and newer A0 adds keywords such as ``embedding=``. We read ``query``, ``limit`` and
``threshold`` by binding the call to the original's signature, and repeat it with another ``limit``
and ``threshold`` changing nothing else: a positional argument stays positional, unknown keywords
(a precomputed ``embedding`` included) pass through untouched, so every search we make uses the
caller's embedding.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SearchCall:
    args: tuple[Any, ...]  # without ``self``
    kwargs: dict[str, Any]
    query: str
    limit: int
    threshold: float | None  # None when the caller's threshold is not a number (it is then kept as given)
    positions: dict[str, int]  # where ``limit`` and ``threshold`` sit in ``args`` when passed positionally

    @classmethod
    def read(cls, original: Callable[..., Any], memory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
             ) -> SearchCall | None:
        """The call's query, limit and threshold, or None when they are not what a rerank can work with."""
        try:
            signature = inspect.signature(original)
            bound = signature.bind(memory, *args, **kwargs)
        except (TypeError, ValueError):
            return None
        query, limit = bound.arguments.get("query"), bound.arguments.get("limit")
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            return None
        threshold = bound.arguments.get("threshold")
        number = float(threshold) if isinstance(threshold, int | float) and not isinstance(threshold, bool) else None
        names = [p.name for p in signature.parameters.values()][1:]  # without self
        positions: dict[str, int] = {name: names.index(name) for name in ("limit", "threshold")
                                     if name in names and name not in kwargs and names.index(name) < len(args)}
        return cls(args=tuple(args), kwargs=dict(kwargs), query=query, limit=limit, threshold=number,
                   positions=positions)

    def pool_threshold(self, wanted: float) -> float | None:
        """The threshold of the pool search: ``wanted``, but never above the caller's own."""
        return None if self.threshold is None else min(wanted, self.threshold)

    def replaced(self, *, limit: int, threshold: float | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The same call asking for ``limit`` results at ``threshold`` (None keeps the caller's)."""
        args, kwargs = list(self.args), dict(self.kwargs)
        changes: dict[str, Any] = {"limit": limit} if threshold is None else {"limit": limit, "threshold": threshold}
        for name, value in changes.items():
            if name in self.positions:
                args[self.positions[name]] = value
            else:
                kwargs[name] = value
        return tuple(args), kwargs
