"""`langchain_community.vectorstores.FAISS` (0.3.19) stand-in, reproducing what A0 relies on:

- With a filter only the `fetch_k` (default 20) nearest vectors are fetched, then filtered, then cut
  to `k`; without one, `k` are fetched.
- Results are the docstore's OWN `Document` objects, best first; a missing docstore entry raises
  `ValueError("Could not find document for id ...")` (the desync error of issues #615/#1595).
- Relevance = the store's `relevance_score_fn` (A0 passes `(1+ip)/2` clamped).
- The async search embeds through the executor, then runs the search in the default executor via
  `run_in_executor` (a copy of the caller's context: ContextVars are visible there).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore

from langchain_community.docstore.in_memory import InMemoryDocstore
from langchain_community.vectorstores.utils import DistanceStrategy

Filter = Callable[[dict[str, Any]], bool] | dict[str, Any]


def _dict_filter(spec: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """Equality per key; a list value means "one of" (the simple part of langchain's dict filter)."""

    def matches(metadata: dict[str, Any]) -> bool:
        for key, expected in spec.items():
            value = metadata.get(key)
            if isinstance(expected, list):
                if value not in expected:
                    return False
            elif value != expected:
                return False
        return True

    return matches


class FAISS(VectorStore):
    def __init__(
        self,
        embedding_function: Embeddings | Callable[[str], list[float]],
        index: Any,
        docstore: InMemoryDocstore,
        index_to_docstore_id: dict[int, str],
        relevance_score_fn: Callable[[float], float] | None = None,
        normalize_L2: bool = False,
        distance_strategy: DistanceStrategy = DistanceStrategy.EUCLIDEAN_DISTANCE,
    ) -> None:
        self.embedding_function = embedding_function
        self.index = index
        self.docstore = docstore
        self.index_to_docstore_id = index_to_docstore_id
        self.distance_strategy = distance_strategy
        self.override_relevance_score_fn = relevance_score_fn
        self._normalize_L2 = normalize_L2

    @property
    def embeddings(self) -> Embeddings | None:
        return self.embedding_function if isinstance(self.embedding_function, Embeddings) else None

    # --- embedding ----------------------------------------------------------------------------

    def _embed_documents(self, texts: list[str]) -> list[list[float]]:
        if isinstance(self.embedding_function, Embeddings):
            return self.embedding_function.embed_documents(texts)
        return [self.embedding_function(t) for t in texts]

    async def _aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if isinstance(self.embedding_function, Embeddings):
            return await self.embedding_function.aembed_documents(texts)
        raise TypeError("`embedding_function` is expected to be an Embeddings object")

    def _embed_query(self, text: str) -> list[float]:
        if isinstance(self.embedding_function, Embeddings):
            return self.embedding_function.embed_query(text)
        return self.embedding_function(text)

    async def _aembed_query(self, text: str) -> list[float]:
        if isinstance(self.embedding_function, Embeddings):
            return await self.embedding_function.aembed_query(text)
        raise TypeError("`embedding_function` is expected to be an Embeddings object")

    # --- adding and deleting -------------------------------------------------------------------

    def _add(
        self, texts: list[str], embeddings: list[list[float]], metadatas: Iterable[dict] | None, ids: list[str] | None
    ) -> list[str]:
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        documents = [Document(page_content=t, metadata=m) for t, m in zip(texts, metas, strict=True)]
        if ids and len(ids) != len(set(ids)):
            raise ValueError("Duplicate ids found in the ids list.")
        ids = ids or [str(uuid.uuid4()) for _ in texts]
        self.index.add(embeddings)
        self.docstore.add(dict(zip(ids, documents, strict=True)))
        start = len(self.index_to_docstore_id)
        self.index_to_docstore_id.update({start + j: id_ for j, id_ in enumerate(ids)})
        return ids

    def add_texts(
        self, texts: Iterable[str], metadatas: list[dict] | None = None, ids: list[str] | None = None, **kwargs: Any
    ) -> list[str]:
        texts = list(texts)
        return self._add(texts, self._embed_documents(texts), metadatas, ids)

    async def aadd_texts(
        self, texts: Iterable[str], metadatas: list[dict] | None = None, ids: list[str] | None = None, **kwargs: Any
    ) -> list[str]:
        texts = list(texts)
        return self._add(texts, await self._aembed_documents(texts), metadatas, ids)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        if ids is None:
            raise ValueError("No ids provided to delete.")
        missing = set(ids).difference(self.index_to_docstore_id.values())
        if missing:
            raise ValueError(f"Some specified ids do not exist in the current store. Ids not found: {missing}")
        reverse = {id_: idx for idx, id_ in self.index_to_docstore_id.items()}
        doomed = {reverse[id_] for id_ in ids}
        self.index.remove_ids(sorted(doomed))
        self.docstore.delete(ids)
        remaining = [id_ for i, id_ in sorted(self.index_to_docstore_id.items()) if i not in doomed]
        self.index_to_docstore_id = dict(enumerate(remaining))
        return True

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        return await run_in_executor(None, self.delete, ids, **kwargs)

    def get_by_ids(self, ids: Iterable[str], /) -> list[Document]:
        found = [self.docstore.search(id_) for id_ in ids]
        return [doc for doc in found if isinstance(doc, Document)]

    async def aget_by_ids(self, ids: Iterable[str], /) -> list[Document]:
        return self.get_by_ids(ids)

    # --- search --------------------------------------------------------------------------------

    def similarity_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Filter | None = None,
        fetch_k: int = 20,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """Raw inner products, best first; a filter sees only the `fetch_k` nearest."""
        scores, indices = self.index.search([embedding], k if filter is None else fetch_k)
        keep = None if filter is None else (filter if callable(filter) else _dict_filter(filter))
        docs: list[tuple[Document, float]] = []
        for j, i in enumerate(indices[0]):
            if i == -1:
                continue
            _id = self.index_to_docstore_id[i]
            doc = self.docstore.search(_id)
            if not isinstance(doc, Document):
                raise ValueError(f"Could not find document for id {_id}, got {doc}")
            if keep is None or keep(doc.metadata):
                docs.append((doc, scores[0][j]))
        threshold = kwargs.get("score_threshold")
        if threshold is not None:
            inner = self.distance_strategy in (DistanceStrategy.MAX_INNER_PRODUCT, DistanceStrategy.JACCARD)
            cmp = operator.ge if inner else operator.le
            docs = [(doc, s) for doc, s in docs if cmp(s, threshold)]
        return docs[:k]

    async def asimilarity_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Filter | None = None,
        fetch_k: int = 20,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        return await run_in_executor(
            None,
            self.similarity_search_with_score_by_vector,
            embedding,
            k=k,
            filter=filter,
            fetch_k=fetch_k,
            **kwargs,
        )

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return self.similarity_search_with_score_by_vector(
            self._embed_query(query), k, filter=filter, fetch_k=fetch_k, **kwargs
        )

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        embedding = await self._aembed_query(query)
        return await self.asimilarity_search_with_score_by_vector(
            embedding, k, filter=filter, fetch_k=fetch_k, **kwargs
        )

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, filter=filter, fetch_k=fetch_k, **kwargs)]

    async def asimilarity_search(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        pairs = await self.asimilarity_search_with_score(query, k, filter=filter, fetch_k=fetch_k, **kwargs)
        return [d for d, _ in pairs]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        if self.override_relevance_score_fn is not None:
            return self.override_relevance_score_fn
        raise ValueError("Unknown distance strategy, must be cosine, max_inner_product, or euclidean")

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        fn = self._select_relevance_score_fn()
        pairs = self.similarity_search_with_score(query, k=k, filter=filter, fetch_k=fetch_k, **kwargs)
        return [(doc, fn(score)) for doc, score in pairs]

    async def _asimilarity_search_with_relevance_scores(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        fn = self._select_relevance_score_fn()
        pairs = await self.asimilarity_search_with_score(query, k=k, filter=filter, fetch_k=fetch_k, **kwargs)
        return [(doc, fn(score)) for doc, score in pairs]
