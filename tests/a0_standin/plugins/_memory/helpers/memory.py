"""A0 `plugins/_memory/helpers/memory.py`, module `plugins._memory.helpers.memory`.

Two versions, chosen when the module is imported by `A0_STANDIN_MEMORY_API` (`MEMORY_API`):
`v1.7` (the default; tag v1.7) and `newer` (upstream's newer memory API, file
commit 0b89c41 of agent0ai/agent-zero `plugins/_memory/helpers/memory.py`):
- `search_similarity_threshold(..., filter="", embedding=None)`: with `embedding`, the store is
  searched by that vector (`asimilarity_search_with_score_by_vector`, `k=limit`) and the
  threshold applied to `_cosine_normalizer(score)`; without it, the v1.7 path;
- `search_similarity_threshold_with_scores(query, limit, threshold, filter="")`: `(Document,
  relevance)` pairs from `asimilarity_search_with_relevance_scores`; `embed_query(query)`;
- `delete_documents_by_query(..., *, include_exact=False, cascade=False)`: also deletes memories
  whose text or metadata contains the query (case and spacing ignored), and memories whose metadata
  names a deleted id; ISO timestamps.

What both versions share:

- `Memory.index` (class level) holds one store per memory subdir for the whole process;
  `Memory.get(agent)` returns a NEW light `Memory(db, subdir)` wrapper around the shared store.
- `search_similarity_threshold(self, query, limit, threshold, filter="")` is a plain `async def`
  (NOT `@extensible`) that calls `self.db.asearch(query, search_type="similarity_score_threshold",
  k=limit, score_threshold=threshold, filter=comparator)` and returns the store's own Documents.
- `delete_documents_by_query` calls the search with `query` POSITIONALLY, in a limit=100 loop.
- The store is the FAISS stand-in over deterministic hash embeddings; nothing is written to disk
  (`Memory.save_counts` records how often A0 would have saved a subdir).
"""

from __future__ import annotations

import ast
import json
import operator
import os
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar

import faiss
import models
from agent import Agent, AgentContext
from helpers.log import LogItem
from helpers.print_style import PrintStyle
from langchain_community.docstore.in_memory import InMemoryDocstore
from langchain_community.vectorstores import FAISS
from langchain_community.vectorstores.utils import DistanceStrategy
from langchain_core.documents import Document

from helpers import files, guids, plugins, projects

MEMORY_APIS = ("v1.7", "newer")
MEMORY_API = os.environ.get("A0_STANDIN_MEMORY_API", "v1.7")
if MEMORY_API not in MEMORY_APIS:
    raise ValueError(f"A0_STANDIN_MEMORY_API must be one of {MEMORY_APIS}, not {MEMORY_API!r}")
NEWER = MEMORY_API == "newer"


class MyFaiss(FAISS):
    def get_by_ids(self, ids: Any, /) -> list[Document]:  # type: ignore[override]
        wanted = ids if isinstance(ids, list) else [ids]
        return [self.docstore._dict[i] for i in wanted if i in self.docstore._dict]

    async def aget_by_ids(self, ids: Any, /) -> list[Document]:  # type: ignore[override]
        return self.get_by_ids(ids)

    def get_all_docs(self) -> dict[str, Document]:
        return self.docstore._dict


class Memory:
    class Area(Enum):
        MAIN = "main"
        FRAGMENTS = "fragments"
        SOLUTIONS = "solutions"

    index: ClassVar[dict[str, MyFaiss]] = {}
    save_counts: ClassVar[dict[str, int]] = {}  # stand-in: would-be `_save_db_file` calls per subdir

    @staticmethod
    def _get_embedding_config(agent: Agent | None = None) -> models.ModelConfig:
        return models.ModelConfig()

    @staticmethod
    async def get(agent: Agent) -> Memory:
        memory_subdir = get_agent_memory_subdir(agent)
        if Memory.index.get(memory_subdir) is None:
            log_item = agent.context.log.log(type="util", heading=f"Initializing VectorDB in '/{memory_subdir}'")
            db, _created = Memory.initialize(log_item, Memory._get_embedding_config(agent), memory_subdir, False)
            Memory.index[memory_subdir] = db
            return Memory(db, memory_subdir=memory_subdir)
        return Memory(db=Memory.index[memory_subdir], memory_subdir=memory_subdir)

    @staticmethod
    async def get_by_subdir(
        memory_subdir: str, log_item: LogItem | None = None, preload_knowledge: bool = True
    ) -> Memory:
        if not Memory.index.get(memory_subdir):
            db, _created = Memory.initialize(log_item, Memory._get_embedding_config(), memory_subdir, False)
            Memory.index[memory_subdir] = db
        return Memory(db=Memory.index[memory_subdir], memory_subdir=memory_subdir)

    @staticmethod
    async def reload(agent: Agent) -> Memory:
        Memory.index.pop(get_agent_memory_subdir(agent), None)
        return await Memory.get(agent)

    @staticmethod
    def initialize(
        log_item: LogItem | None, model_config: models.ModelConfig, memory_subdir: str, in_memory: bool = False
    ) -> tuple[MyFaiss, bool]:
        """A new, empty store: `IndexFlatIP`, COSINE strategy, `_cosine_normalizer` relevance."""
        if log_item:
            log_item.stream(progress="\nInitializing VectorDB")
        embedder = models.get_embedding_model(model_config.provider, model_config.name, **model_config.build_kwargs())
        db = MyFaiss(
            embedding_function=embedder,
            index=faiss.IndexFlatIP(len(embedder.embed_query("example"))),
            docstore=InMemoryDocstore(),
            index_to_docstore_id={},
            distance_strategy=DistanceStrategy.COSINE,
            relevance_score_fn=Memory._cosine_normalizer,
        )
        return db, True

    def __init__(self, db: MyFaiss, memory_subdir: str) -> None:
        self.db = db
        self.memory_subdir = memory_subdir

    def get_document_by_id(self, id: str) -> Document | None:
        return self.db.get_by_ids(id)[0]

    async def _search_by_query(self, query: str, limit: int, threshold: float, filter: str) -> list[Document]:
        comparator = Memory._get_comparator(filter) if filter else None
        return await self.db.asearch(
            query,
            search_type="similarity_score_threshold",
            k=limit,
            score_threshold=threshold,
            filter=comparator,
        )

    async def _delete_by_search(self, query: str, threshold: float, filter: str) -> list[Document]:
        """The shared loop: search 100 at a time (query positionally), delete what came back."""
        k = 100
        removed: list[Document] = []
        while True:
            docs = await self.search_similarity_threshold(query, limit=k, threshold=threshold, filter=filter)
            removed += docs
            document_ids = [doc.metadata["id"] for doc in docs]
            if document_ids:
                await self.db.adelete(ids=document_ids)
            if len(document_ids) < k:
                break
        return removed

    if NEWER:

        async def search_similarity_threshold(
            self, query: str, limit: int, threshold: float, filter: str = "", embedding: list[float] | None = None
        ) -> list[Document]:
            if embedding is None:
                return await self._search_by_query(query, limit, threshold, filter)
            comparator = Memory._get_comparator(filter) if filter else None
            pairs = await self.db.asimilarity_search_with_score_by_vector(embedding, k=limit, filter=comparator)
            return [doc for doc, score in pairs if Memory._cosine_normalizer(score) >= threshold]

        async def search_similarity_threshold_with_scores(
            self, query: str, limit: int, threshold: float, filter: str = ""
        ) -> list[tuple[Document, float]]:
            comparator = Memory._get_comparator(filter) if filter else None
            return await self.db.asimilarity_search_with_relevance_scores(
                query, k=limit, score_threshold=threshold, filter=comparator
            )

        async def embed_query(self, query: str) -> list[float]:
            return await self.db.embedding_function.aembed_query(query)

        async def delete_documents_by_query(
            self, query: str, threshold: float, filter: str = "", *, include_exact: bool = False, cascade: bool = False
        ) -> list[Document]:
            removed = await self._delete_by_search(query, threshold, filter)
            if include_exact:
                removed += await self._delete_found(self._exact_matches(query, filter, removed))
            if cascade:
                removed += await self._delete_found(self._referring_to(removed))
            if removed:
                self._save_db()
            return removed

    else:

        async def search_similarity_threshold(
            self, query: str, limit: int, threshold: float, filter: str = ""
        ) -> list[Document]:
            return await self._search_by_query(query, limit, threshold, filter)

        async def delete_documents_by_query(self, query: str, threshold: float, filter: str = "") -> list[Document]:
            removed = await self._delete_by_search(query, threshold, filter)
            if removed:
                self._save_db()
            return removed

    async def _delete_found(self, docs: list[Document]) -> list[Document]:
        if docs:
            await self.db.adelete(ids=[doc.metadata["id"] for doc in docs])
        return docs

    def _exact_matches(self, query: str, filter: str, skip: list[Document]) -> list[Document]:
        """Newer API: memories whose text or metadata contains the query (case and spacing ignored)."""
        needle = _plain(query)
        if len(needle) < 3:
            return []
        keep = Memory._get_comparator(filter) if filter else None
        skipped = {doc.metadata.get("id") for doc in skip}
        return [
            doc for doc in self.db.get_all_docs().values()
            if doc.metadata.get("id") not in skipped and (keep is None or keep(doc.metadata))
            and needle in _plain(doc.page_content + "\n" + json.dumps(doc.metadata, sort_keys=True, default=str))
        ]

    def _referring_to(self, removed: list[Document]) -> list[Document]:
        """Newer API: memories whose metadata names a removed memory's id (a comma list counts)."""
        ids = {str(doc.metadata.get("id")) for doc in removed}
        return [
            doc for doc in self.db.get_all_docs().values()
            if str(doc.metadata.get("id")) not in ids and _mentions(doc.metadata, ids)
        ]

    async def delete_documents_by_ids(self, ids: list[str]) -> list[Document]:
        rem_docs = await self.db.aget_by_ids(ids)
        if rem_docs:
            await self.db.adelete(ids=[doc.metadata["id"] for doc in rem_docs])
            self._save_db()
        return rem_docs

    async def insert_text(self, text: str, metadata: dict[str, Any] | None = None) -> str:
        ids = await self.insert_documents([Document(text, metadata=metadata or {})])
        return ids[0]

    async def insert_documents(self, docs: list[Document]) -> list[str]:
        ids = [self._generate_doc_id() for _ in docs]
        timestamp = self.get_timestamp()
        if ids:
            for doc, id in zip(docs, ids, strict=True):
                doc.metadata["id"] = id
                doc.metadata["timestamp"] = timestamp
                if not doc.metadata.get("area", ""):
                    doc.metadata["area"] = Memory.Area.MAIN.value
            await self.db.aadd_documents(documents=docs, ids=ids)
            self._save_db()
        return ids

    async def update_documents(self, docs: list[Document]) -> list[str]:
        ids = [doc.metadata["id"] for doc in docs]
        await self.db.adelete(ids=ids)
        inserted = await self.db.aadd_documents(documents=docs, ids=ids)
        self._save_db()
        return inserted

    def _save_db(self) -> None:
        Memory._save_db_file(self.db, self.memory_subdir)

    def _generate_doc_id(self) -> str:
        while True:
            doc_id = guids.generate_id(10)
            if not self.db.get_by_ids(doc_id):
                return doc_id

    @staticmethod
    def _save_db_file(db: MyFaiss, memory_subdir: str) -> None:
        Memory.save_counts[memory_subdir] = Memory.save_counts.get(memory_subdir, 0) + 1

    @staticmethod
    def _get_comparator(condition: str) -> Callable[[dict[str, Any]], Any]:
        """Evaluate the filter against a document's metadata; any error -> False (as in A0)."""

        def comparator(data: dict[str, Any]) -> Any:
            try:
                return simple_eval(condition, names=data)
            except Exception as e:
                PrintStyle.error(f"Error evaluating condition: {e}")
                return False

        return comparator

    @staticmethod
    def _cosine_normalizer(val: float) -> float:
        return max(0.0, min(1.0, (1 + val) / 2))

    @staticmethod
    def format_docs_plain(docs: list[Document]) -> list[str]:
        result = []
        for doc in docs:
            text = "".join(f"{k}: {v}\n" for k, v in doc.metadata.items())
            result.append(text + f"Content: {doc.page_content}")
        return result

    @staticmethod
    def get_timestamp() -> str:
        now = datetime.now()
        return now.astimezone().isoformat(timespec="seconds") if NEWER else now.strftime("%Y-%m-%d %H:%M:%S")


def _plain(text: str) -> str:
    return " ".join(str(text or "").casefold().split())


def _mentions(value: Any, ids: set[str]) -> bool:
    if isinstance(value, dict):
        return any(_mentions(item, ids) for item in value.values())
    if isinstance(value, list | tuple | set):
        return any(_mentions(item, ids) for item in value)
    text = str(value or "").strip()
    return bool(text) and (text in ids or any(part.strip() in ids for part in text.split(",")))


def reload() -> None:
    """Clear the index; every store is rebuilt (empty, in the stand-in) on next use."""
    Memory.index = {}


def abs_db_dir(memory_subdir: str) -> str:
    if memory_subdir.startswith("projects/"):
        return files.get_abs_path(projects.get_project_meta(memory_subdir[9:]), "memory")
    return files.get_abs_path("usr/memory", memory_subdir)


def get_agent_memory_subdir(agent: Agent) -> str:
    """`projects/<name>` with project isolation on and a project active, else the configured subdir."""
    config = plugins.get_plugin_config("_memory", agent)
    if not config:
        return "default"
    if config.get("project_memory_isolation", True):
        project_name = projects.get_context_project_name(agent.context)
        if project_name:
            return "projects/" + project_name
    return config.get("agent_memory_subdir", "") or "default"


def get_context_memory_subdir(context: AgentContext) -> str:
    return get_agent_memory_subdir(context.get_agent())


def get_existing_memory_subdirs() -> list[str]:
    subdirs = sorted(Memory.index)
    if "default" not in subdirs:
        subdirs.insert(0, "default")
    return subdirs


# --- the filter language: a small, safe stand-in for simpleeval.simple_eval ------------------------


class NameNotDefined(NameError):
    """Raised for a name absent from the metadata (simpleeval's error of the same name)."""


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
}


_FUNCTIONS: dict[str, Callable[..., Any]] = {"int": int, "float": float, "str": str}


def _eval_bool(node: ast.BoolOp, names: dict[str, Any]) -> Any:
    value: Any = isinstance(node.op, ast.And)
    for operand in node.values:
        value = _eval_node(operand, names)
        if isinstance(node.op, ast.And) != bool(value):
            return value
    return value


def _eval_compare(node: ast.Compare, names: dict[str, Any]) -> bool:
    left = _eval_node(node.left, names)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        right = _eval_node(comparator, names)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _eval_call(node: ast.Call, names: dict[str, Any]) -> Any:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
        raise SyntaxError("Sorry, only int(), float() and str() may be called")
    return _FUNCTIONS[node.func.id](*(_eval_node(a, names) for a in node.args))


def _eval_node(node: ast.AST, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise NameNotDefined(f"'{node.id}' is not defined for expression")
        return names[node.id]
    if isinstance(node, ast.BoolOp):
        return _eval_bool(node, names)
    if isinstance(node, ast.Compare):
        return _eval_compare(node, names)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        operand = _eval_node(node.operand, names)
        return (not operand) if isinstance(node.op, ast.Not) else -operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval_node(node.left, names), _eval_node(node.right, names))
    if isinstance(node, ast.IfExp):
        branch = node.body if _eval_node(node.test, names) else node.orelse
        return _eval_node(branch, names)
    if isinstance(node, ast.Subscript):
        return _eval_node(node.value, names)[_eval_node(node.slice, names)]
    if isinstance(node, ast.Call):
        return _eval_call(node, names)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_eval_node(e, names) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    raise SyntaxError(f"Sorry, {type(node).__name__} is not available in this evaluator")


def simple_eval(expr: str, names: dict[str, Any] | None = None) -> Any:
    """simpleeval's core: comparisons, `and`/`or`/`not`, constants, metadata names, arithmetic,
    subscripts, `x if c else y` and its default functions int/float/str. No attributes, no other
    calls: anything else raises, which `_get_comparator` turns into False."""
    return _eval_node(ast.parse(expr.strip(), mode="eval").body, dict(names or {}))
