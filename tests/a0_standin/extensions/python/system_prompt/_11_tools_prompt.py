"""A0 `extensions/python/system_prompt/_11_tools_prompt.py` (v1.7): every `agent.system.tool.*.md` found
along the agent's prompt folders (enabled plugins' `prompts/` included; the first file of a name wins,
sorted by file name), joined into `agent.system.tools.md`. This is how a plugin's tool prompt reaches
the system prompt of every agent, on every LLM call."""

from __future__ import annotations

import os
from typing import Any

from helpers.extension import Extension

from helpers import files, subagents


class ToolsPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if self.agent is None or system_prompt is None:
            return
        tool_files = files.get_unique_filenames_in_dirs(subagents.get_paths(self.agent, "prompts"),
                                                        "agent.system.tool.*.md")
        tools = [self.agent.read_prompt(os.path.basename(path)) for path in tool_files]
        system_prompt.append(self.agent.read_prompt("agent.system.tools.md", tools="\n\n".join(tools)))
