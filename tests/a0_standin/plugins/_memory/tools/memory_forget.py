"""A0 v1.7 `_memory` tool `memory_forget`, broken as shipped: it imports
`tools.memory_load`, which does not exist, so `Agent.get_tool` falls back to the Unknown tool."""

from __future__ import annotations

from typing import Any

from helpers.tool import Response, Tool
from plugins._memory.helpers.memory import Memory
from tools.memory_load import DEFAULT_THRESHOLD  # type: ignore[import-not-found]  # fails, as in A0


class MemoryForget(Tool):
    async def execute(
        self, query: str = "", threshold: float = DEFAULT_THRESHOLD, filter: str = "", **kwargs: Any
    ) -> Response:
        db = await Memory.get(self.agent)
        docs = await db.delete_documents_by_query(query=query, threshold=threshold, filter=filter)
        return Response(message=f"{len(docs)} memories removed", break_loop=False)
