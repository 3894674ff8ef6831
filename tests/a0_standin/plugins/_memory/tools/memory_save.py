"""A0 `_memory` tool `memory_save`: insert text; extra keyword arguments become metadata."""

from __future__ import annotations

from typing import Any

from helpers.tool import Response, Tool
from plugins._memory.helpers.memory import Memory


class MemorySave(Tool):
    async def execute(self, text: str = "", area: str = "", **kwargs: Any) -> Response:
        metadata = {"area": area or Memory.Area.MAIN.value, **kwargs}
        db = await Memory.get(self.agent)
        memory_id = await db.insert_text(text, metadata)
        return Response(message=f"Memory saved with id {memory_id}", break_loop=False)
