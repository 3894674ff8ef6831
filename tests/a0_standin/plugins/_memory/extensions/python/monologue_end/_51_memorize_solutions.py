"""A0 `_memory` monologue_end/_51_memorize_solutions: the same flow for the `solutions` area."""

from __future__ import annotations

from typing import ClassVar

from plugins._memory.extensions.python.monologue_end._50_memorize_fragments import MemorizeMemories
from plugins._memory.helpers.memory import Memory


class MemorizeSolutions(MemorizeMemories):
    AREA: ClassVar[str] = Memory.Area.SOLUTIONS.value
    SYSTEM_PROMPT: ClassVar[str] = "memory.solutions_sum.sys.md"
