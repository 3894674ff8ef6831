"""A0 `tools/unknown.py`: what `Agent.get_tool` returns when no tool file loads."""

from __future__ import annotations

from typing import Any

from helpers.tool import Response, Tool


class Unknown(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        return Response(
            message=self.agent.read_prompt("fw.tool_not_found.md", tool_name=self.name, tools_prompt=""),
            break_loop=False,
        )
