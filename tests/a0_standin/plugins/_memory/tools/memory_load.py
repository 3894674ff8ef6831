"""A0 `_memory` tool `memory_load`: defaults threshold 0.7, limit 10, filter ""."""

from __future__ import annotations

from typing import Any

from helpers.tool import Response, Tool
from plugins._memory.helpers.memory import Memory

DEFAULT_THRESHOLD = 0.7
DEFAULT_LIMIT = 10


class MemoryLoad(Tool):
    async def execute(
        self,
        query: str = "",
        threshold: float = DEFAULT_THRESHOLD,
        limit: int = DEFAULT_LIMIT,
        filter: str = "",
        **kwargs: Any,
    ) -> Response:
        db = await Memory.get(self.agent)
        docs = await db.search_similarity_threshold(query=query, limit=limit, threshold=threshold, filter=filter)
        if len(docs) == 0:
            result = self.agent.read_prompt("fw.memories_not_found.md", query=query)
        else:
            result = "\n\n".join(Memory.format_docs_plain(docs))
        return Response(message=result, break_loop=False)
