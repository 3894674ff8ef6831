"""A0 `_memory` API `memory_dashboard`, reduced to the actions the UI lists with:
`search` (limit 100, threshold 0.6 defaults; no query -> newest first), `get_memory_subdirs`, `delete`."""

from __future__ import annotations

from typing import Any

from helpers.api import ApiHandler, Request, Response
from langchain_core.documents import Document
from plugins._memory.helpers.memory import Memory, get_existing_memory_subdirs


class MemoryDashboard(ApiHandler):
    async def process(self, input: dict[str, Any], request: Request) -> dict[str, Any] | Response:
        try:
            action = input.get("action", "search")
            if action == "get_memory_subdirs":
                return {"success": True, "subdirs": get_existing_memory_subdirs()}
            if action == "search":
                return await self._search_memories(input)
            if action == "delete":
                return await self._delete_memory(input)
            return {"success": False, "error": f"Unknown action: {action}", "memories": [], "total_count": 0}
        except Exception as e:
            return {"success": False, "error": str(e), "memories": [], "total_count": 0}

    async def _search_memories(self, input: dict[str, Any]) -> dict[str, Any]:
        memory_subdir = input.get("memory_subdir", "default")
        area_filter = input.get("area", "")
        search_query = input.get("search", "")
        limit = input.get("limit", 100)
        threshold = input.get("threshold", 0.6)
        memory = await Memory.get_by_subdir(memory_subdir, preload_knowledge=False)
        if search_query:
            memories = await memory.search_similarity_threshold(
                query=search_query,
                limit=limit,
                threshold=threshold,
                filter=f"area == '{area_filter}'" if area_filter else "",
            )
        else:
            memories = [
                doc
                for doc in memory.db.get_all_docs().values()
                if not area_filter or doc.metadata.get("area", "") == area_filter
            ]
            memories.sort(key=lambda m: m.metadata.get("timestamp", "0000-00-00 00:00:00"), reverse=True)
            memories = memories[:limit] if limit else memories
        formatted = [self._format(m) for m in memories]
        return {
            "success": True,
            "memories": formatted,
            "total_count": len(formatted),
            "total_db_count": len(memory.db.get_all_docs()),
            "search_query": search_query,
            "area_filter": area_filter,
            "memory_subdir": memory_subdir,
        }

    async def _delete_memory(self, input: dict[str, Any]) -> dict[str, Any]:
        memory = await Memory.get_by_subdir(input.get("memory_subdir", "default"), preload_knowledge=False)
        memory_id = input.get("memory_id")
        if not memory_id:
            return {"success": False, "error": "Memory ID is required for deletion"}
        removed = await memory.delete_documents_by_ids([memory_id])
        if not removed:
            return {"success": False, "error": f"Memory with ID '{memory_id}' not found"}
        return {"success": True, "message": f"Memory {memory_id} deleted successfully"}

    def _format(self, m: Document) -> dict[str, Any]:
        metadata = m.metadata
        return {
            "id": metadata.get("id", "unknown"),
            "area": metadata.get("area", "unknown"),
            "timestamp": metadata.get("timestamp", "unknown"),
            "content_full": m.page_content,
            "knowledge_source": metadata.get("knowledge_source", False),
            "metadata": metadata,
        }
