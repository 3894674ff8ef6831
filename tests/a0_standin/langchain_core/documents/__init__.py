"""`langchain_core.documents.Document` stand-in.

Like the real pydantic model: `Document(page_content, metadata=..., id=...)`, mutable, compared by
value (`==`), unhashable, `metadata` copied on construction. Identity matters: the vector store
returns its OWN Document objects, so mutating one mutates the stored memory.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar


class Document:
    type: ClassVar[str] = "Document"
    __hash__ = None  # type: ignore[assignment]  # pydantic models are unhashable

    def __init__(
        self, page_content: str, metadata: dict[str, Any] | None = None, id: str | None = None, **kwargs: Any
    ) -> None:
        if not isinstance(page_content, str):
            raise TypeError("page_content: Input should be a valid string")
        self.page_content = page_content
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.id = id

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Document)
        return (self.page_content, self.metadata, self.id) == (other.page_content, other.metadata, other.id)

    def __repr__(self) -> str:
        id_part = f"id='{self.id}', " if self.id is not None else ""
        return f"Document({id_part}metadata={self.metadata!r}, page_content={self.page_content!r})"

    def __str__(self) -> str:
        if self.metadata:
            return f"page_content='{self.page_content}' metadata={self.metadata}"
        return f"page_content='{self.page_content}'"

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Document:
        """pydantic's copy: shallow by default (the copy SHARES `metadata` unless deep or updated)."""
        clone = copy.deepcopy(self) if deep else copy.copy(self)
        for key, value in (update or {}).items():
            setattr(clone, key, value)
        return clone

    def model_dump(self) -> dict[str, Any]:
        return {"id": self.id, "metadata": self.metadata, "page_content": self.page_content, "type": self.type}


__all__ = ["Document"]
