"""One call of ``search_similarity_threshold``, read and repeated in the caller's own shape.

A0's callers mix positional and keyword arguments (``delete_documents_by_query`` passes the query
positionally) and newer A0 adds keywords such as ``embedding=``. We read ``query`` and ``limit`` by
binding the call to the original's signature, and repeat it with a larger ``limit`` changing nothing
else: a positional limit stays positional, unknown keywords pass through untouched.
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
    limit_index: int | None  # position of ``limit`` in ``args`` when passed positionally

    @classmethod
    def read(cls, original: Callable[..., Any], memory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
             ) -> SearchCall | None:
        """The call's query and limit, or None when they are not what a rerank can work with."""
        try:
            signature = inspect.signature(original)
            bound = signature.bind(memory, *args, **kwargs)
        except (TypeError, ValueError):
            return None
        query, limit = bound.arguments.get("query"), bound.arguments.get("limit")
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            return None
        names = [p.name for p in signature.parameters.values()][1:]  # without self
        index = names.index("limit") if "limit" not in kwargs and "limit" in names else None
        if index is not None and index >= len(args):
            index = None
        return cls(args=tuple(args), kwargs=dict(kwargs), query=query, limit=limit, limit_index=index)

    def with_limit(self, limit: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The same call asking for ``limit`` results."""
        if self.limit_index is not None:
            args = list(self.args)
            args[self.limit_index] = limit
            return tuple(args), dict(self.kwargs)
        return self.args, {**self.kwargs, "limit": limit}
