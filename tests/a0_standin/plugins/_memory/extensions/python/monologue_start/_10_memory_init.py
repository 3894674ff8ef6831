"""A0 `_memory` monologue_start/_10_memory_init: open (build) the agent's memory store."""

from __future__ import annotations

from typing import Any

from agent import LoopData
from helpers.extension import Extension
from plugins._memory.helpers import memory


class MemoryInit(Extension):
    async def execute(self, loop_data: LoopData | None = None, **kwargs: Any) -> None:
        if not self.agent:
            return
        await memory.Memory.get(self.agent)
