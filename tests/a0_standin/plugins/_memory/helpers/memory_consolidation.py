"""A0 `_memory/helpers/memory_consolidation.py` (v1.7), reduced to the parts that touch the search:

- `_find_similar_memories`: one search with `limit=max_similar_memories` (10 by default, memorize
  passes 8), `threshold=similarity_threshold`, `filter=f"area == '{area}'"`, plus one search per
  utility-model keyword with `limit=max(3, max_similar // n)`; de-duplicated by id; each doc's
  `_consolidation_similarity` is WRITTEN INTO THE STORE'S OWN METADATA by rank (1.0 down to the
  0.9 replace-safety threshold); the first `max_llm_context_memories` are kept.
- The utility model then picks an action (JSON); `replace` is blocked (kept separate) when a doc to
  remove has `_consolidation_similarity` below 0.9. `update` is not reproduced (treated as skip).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from agent import Agent
from helpers.dirty_json import DirtyJson
from helpers.log import LogItem
from helpers.print_style import PrintStyle
from langchain_core.documents import Document
from plugins._memory.helpers.memory import Memory
from plugins._memory.tools.memory_load import DEFAULT_THRESHOLD as DEFAULT_MEMORY_THRESHOLD


class ConsolidationAction(Enum):
    MERGE = "merge"
    REPLACE = "replace"
    KEEP_SEPARATE = "keep_separate"
    UPDATE = "update"
    SKIP = "skip"


@dataclass
class ConsolidationConfig:
    similarity_threshold: float = DEFAULT_MEMORY_THRESHOLD
    max_similar_memories: int = 10
    consolidation_sys_prompt: str = "memory.consolidation.sys.md"
    consolidation_msg_prompt: str = "memory.consolidation.msg.md"
    max_llm_context_memories: int = 5
    keyword_extraction_sys_prompt: str = "memory.keyword_extraction.sys.md"
    keyword_extraction_msg_prompt: str = "memory.keyword_extraction.msg.md"
    processing_timeout_seconds: int = 60
    replace_similarity_threshold: float = 0.9


@dataclass
class ConsolidationResult:
    action: ConsolidationAction
    memories_to_remove: list[str] = field(default_factory=list)
    new_memory_content: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    reasoning: str = ""


class MemoryConsolidator:
    def __init__(self, agent: Agent, config: ConsolidationConfig | None = None) -> None:
        self.agent = agent
        self.config = config or ConsolidationConfig()

    async def process_new_memory(
        self, new_memory: str, area: str, metadata: dict[str, Any], log_item: LogItem | None = None
    ) -> dict[str, Any]:
        """Run the pipeline in its own task with a timeout; never raises."""
        try:
            task = asyncio.create_task(self._process(new_memory, area, metadata, log_item))
            return await asyncio.wait_for(task, timeout=self.config.processing_timeout_seconds)
        except Exception as e:
            PrintStyle.error(f"Memory consolidation error for area {area}: {e}")
            return {"success": False, "memory_ids": []}

    async def _process(
        self, new_memory: str, area: str, metadata: dict[str, Any], log_item: LogItem | None
    ) -> dict[str, Any]:
        db = await Memory.get(self.agent)
        similar = await self._find_similar_memories(new_memory, area, log_item)
        if similar:
            existing = {d.metadata.get("id") for d in db.db.get_by_ids([str(d.metadata.get("id")) for d in similar])}
            similar = [d for d in similar if d.metadata.get("id") in existing]
        result = await self._analyze(new_memory, similar, area) if similar else None
        if result is None or result.action in (ConsolidationAction.SKIP, ConsolidationAction.UPDATE):
            metadata.setdefault("timestamp", self._get_timestamp())
            return {"success": True, "memory_ids": [await db.insert_text(new_memory, metadata)]}
        ids = await self._apply(db, result, area, metadata)
        return {"success": bool(ids), "memory_ids": ids}

    async def _find_similar_memories(
        self, new_memory: str, area: str, log_item: LogItem | None = None
    ) -> list[Document]:
        db = await Memory.get(self.agent)
        queries = await self._extract_search_keywords(new_memory, log_item)
        found = list(
            await db.search_similarity_threshold(
                query=new_memory,
                limit=self.config.max_similar_memories,
                threshold=self.config.similarity_threshold,
                filter=f"area == '{area}'",
            )
        )
        for query in queries:
            if query.strip():
                found += await db.search_similarity_threshold(
                    query=query.strip(),
                    limit=max(3, self.config.max_similar_memories // max(1, len(queries))),
                    threshold=self.config.similarity_threshold,
                    filter=f"area == '{area}'",
                )
        seen: set[str] = set()
        unique: list[Document] = []
        for doc in found:
            doc_id = doc.metadata.get("id")
            if doc_id and doc_id not in seen:
                seen.add(doc_id)
                unique.append(doc)
        self._write_rank_similarity(unique)
        return unique[: self.config.max_llm_context_memories]

    def _write_rank_similarity(self, docs: list[Document]) -> None:
        """Rank -> fake similarity between the 0.9 safety threshold and 1.0, into doc.metadata."""
        safety = self.config.replace_similarity_threshold
        total = len(docs)
        for i, doc in enumerate(docs):
            if total == 1:
                similarity = 1.0
            else:
                similarity = safety + (1.0 - safety) * (1.0 - i / (total - 1))
                similarity = max(similarity, self.config.similarity_threshold)
            doc.metadata["_consolidation_similarity"] = similarity

    async def _extract_search_keywords(self, new_memory: str, log_item: LogItem | None = None) -> list[str]:
        try:
            response = await self.agent.call_utility_model(
                system=self.agent.read_prompt(self.config.keyword_extraction_sys_prompt),
                message=self.agent.read_prompt(self.config.keyword_extraction_msg_prompt, memory_content=new_memory),
                background=True,
            )
            parsed = DirtyJson.parse_string(response.strip())
            if isinstance(parsed, list):
                return [str(k) for k in parsed if k]
            return [parsed] if isinstance(parsed, str) else []
        except Exception as e:
            PrintStyle.warning(f"Keyword extraction failed: {e}")
            if len(new_memory) <= 200:
                return [new_memory.strip()]
            first = new_memory.split(".")[0]
            return [(first if len(first) <= 200 else new_memory[:200]).strip()]

    async def _analyze(self, new_memory: str, similar: list[Document], area: str) -> ConsolidationResult:
        listing = "\n\n".join(
            f"ID: {d.metadata.get('id')}\nTimestamp: {d.metadata.get('timestamp', 'unknown')}\n"
            f"Content: {d.page_content}"
            for d in similar
        )
        try:
            response = await self.agent.call_utility_model(
                system=self.agent.read_prompt(self.config.consolidation_sys_prompt),
                message=self.agent.read_prompt(
                    self.config.consolidation_msg_prompt, new_memory=new_memory, similar_memories=listing, area=area
                ),
                background=True,
            )
            parsed = DirtyJson.parse_string(response.strip())
            if not isinstance(parsed, dict):
                raise ValueError("LLM response is not a valid JSON object")
            try:
                action = ConsolidationAction(str(parsed.get("action", "skip")).lower())
            except ValueError:
                action = ConsolidationAction.SKIP
            keeps_original = action not in (ConsolidationAction.MERGE, ConsolidationAction.REPLACE)
            return ConsolidationResult(
                action=action,
                memories_to_remove=list(parsed.get("memories_to_remove", [])),
                new_memory_content=parsed.get("new_memory_content", new_memory if keeps_original else ""),
                metadata=dict(parsed.get("metadata", {})),
                reasoning=str(parsed.get("reasoning", "")),
            )
        except Exception as e:
            PrintStyle.warning(f"LLM consolidation analysis failed: {e}")
            return ConsolidationResult(action=ConsolidationAction.SKIP, reasoning=f"Analysis failed: {e}")

    async def _apply(self, db: Memory, result: ConsolidationResult, area: str, metadata: dict[str, Any]) -> list[str]:
        if not result.new_memory_content:
            return []
        base: dict[str, Any] = {
            "area": area,
            "timestamp": self._get_timestamp(),
            "consolidation_action": result.action.value,
        }
        if result.action == ConsolidationAction.REPLACE and result.memories_to_remove:
            candidates = await db.db.aget_by_ids(result.memories_to_remove)
            unsafe = [
                m
                for m in candidates
                if m.metadata.get("_consolidation_similarity", 0.7) < self.config.replace_similarity_threshold
            ]
            if unsafe:
                base.update(consolidation_action="keep_separate_safety", original_action="replace")
                return [await db.insert_text(result.new_memory_content, {**base, **metadata, **result.metadata})]
        if result.action in (ConsolidationAction.REPLACE, ConsolidationAction.MERGE) and result.memories_to_remove:
            await db.delete_documents_by_ids(result.memories_to_remove)
            base["replaced_memories"] = list(result.memories_to_remove)
        return [await db.insert_text(result.new_memory_content, {**base, **metadata, **result.metadata})]

    def _get_timestamp(self) -> str:
        return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")


def create_memory_consolidator(agent: Agent, **config_overrides: Any) -> MemoryConsolidator:
    return MemoryConsolidator(agent, ConsolidationConfig(**config_overrides))
