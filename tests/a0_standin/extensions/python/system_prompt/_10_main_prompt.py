"""A0 `extensions/python/system_prompt/_10_main_prompt.py` (v1.7): `agent.system.main.md` first."""

from __future__ import annotations

from typing import Any

from helpers.extension import Extension


class MainPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if self.agent is not None and system_prompt is not None:
            system_prompt.append(self.agent.read_prompt("agent.system.main.md"))
