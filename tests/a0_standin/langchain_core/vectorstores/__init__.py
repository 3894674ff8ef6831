"""`langchain_core.vectorstores.VectorStore` stand-in: the generic search entry points A0 uses.

- `asearch(query, "similarity_score_threshold", k=, score_threshold=, filter=)` ->
  `asimilarity_search_with_relevance_scores`, then drops the scores (A0 gets no scores).
- `(a)similarity_search_with_relevance_scores(query, k=4, **kwargs)` pops `score_threshold`, asks the
  store for relevance scores and keeps those `>= score_threshold`.
"""

from __future__ import annotations

import warnings
from typing import Any

from langchain_core.documents import Document


def _check_range(pairs: list[tuple[Document, float]]) -> None:
    if any(score < 0.0 or score > 1.0 for _, score in pairs):
        warnings.warn(f"Relevance scores must be between 0 and 1, got {pairs}", stacklevel=3)


def _keep_above(pairs: list[tuple[Document, float]], threshold: float | None) -> list[tuple[Document, float]]:
    if threshold is None:
        return pairs
    return [(doc, score) for doc, score in pairs if score >= threshold]


class VectorStore:
    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        raise NotImplementedError

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        raise NotImplementedError

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        raise NotImplementedError

    async def _asimilarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        raise NotImplementedError

    def similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        threshold = kwargs.pop("score_threshold", None)
        pairs = self._similarity_search_with_relevance_scores(query, k=k, **kwargs)
        _check_range(pairs)
        return _keep_above(pairs, threshold)

    async def asimilarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        threshold = kwargs.pop("score_threshold", None)
        pairs = await self._asimilarity_search_with_relevance_scores(query, k=k, **kwargs)
        _check_range(pairs)
        return _keep_above(pairs, threshold)

    def search(self, query: str, search_type: str, **kwargs: Any) -> list[Document]:
        if search_type == "similarity":
            return self.similarity_search(query, **kwargs)
        if search_type == "similarity_score_threshold":
            return [doc for doc, _ in self.similarity_search_with_relevance_scores(query, **kwargs)]
        raise ValueError(
            f"search_type of {search_type} not allowed. Expected "
            "search_type to be 'similarity', 'similarity_score_threshold' or 'mmr'."
        )

    async def asearch(self, query: str, search_type: str, **kwargs: Any) -> list[Document]:
        if search_type == "similarity":
            return await self.asimilarity_search(query, **kwargs)
        if search_type == "similarity_score_threshold":
            pairs = await self.asimilarity_search_with_relevance_scores(query, **kwargs)
            return [doc for doc, _ in pairs]
        raise ValueError(
            f"search_type of {search_type} not allowed. Expected "
            "search_type to be 'similarity', 'similarity_score_threshold' or 'mmr'."
        )

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        if "ids" not in kwargs:
            ids = [doc.id for doc in documents]
            if any(ids):
                kwargs["ids"] = ids
        texts = [doc.page_content for doc in documents]
        metadatas = [doc.metadata for doc in documents]
        return self.add_texts(texts, metadatas, **kwargs)

    async def aadd_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        if "ids" not in kwargs:
            ids = [doc.id for doc in documents]
            if any(ids):
                kwargs["ids"] = ids
        texts = [doc.page_content for doc in documents]
        metadatas = [doc.metadata for doc in documents]
        return await self.aadd_texts(texts, metadatas, **kwargs)

    def add_texts(self, texts: list[str], metadatas: list[dict] | None = None, **kwargs: Any) -> list[str]:
        raise NotImplementedError

    async def aadd_texts(self, texts: list[str], metadatas: list[dict] | None = None, **kwargs: Any) -> list[str]:
        raise NotImplementedError
