"""`InMemoryDocstore`: a dict of id -> Document; `search` returns the stored object itself."""

from __future__ import annotations

from langchain_core.documents import Document


class InMemoryDocstore:
    def __init__(self, _dict: dict[str, Document] | None = None) -> None:
        self._dict: dict[str, Document] = _dict if _dict is not None else {}

    def add(self, texts: dict[str, Document]) -> None:
        overlapping = set(texts).intersection(self._dict)
        if overlapping:
            raise ValueError(f"Tried to add ids that already exist: {overlapping}")
        self._dict = {**self._dict, **texts}

    def delete(self, ids: list[str]) -> None:
        overlapping = set(ids).intersection(self._dict)
        if not overlapping:
            raise ValueError(f"Tried to delete ids that does not  exist: {ids}")
        for _id in ids:
            self._dict.pop(_id)

    def search(self, search: str) -> str | Document:
        if search not in self._dict:
            return f"ID {search} not found."
        return self._dict[search]
