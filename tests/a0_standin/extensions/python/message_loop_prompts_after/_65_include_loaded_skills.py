"""A0 `extensions/python/message_loop_prompts_after/_65_include_loaded_skills.py` (v1.7): the skills
loaded with `skills_tool:load`, whole, into `extras_persistent["loaded_skills"]` on every loop."""

from __future__ import annotations

from typing import Any

from helpers.extension import Extension
from tools.skills_tool import DATA_NAME_LOADED_SKILLS

from helpers import skills


class IncludeLoadedSkills(Extension):
    async def execute(self, loop_data: Any = None, **kwargs: Any) -> None:
        if not self.agent or loop_data is None:
            return
        names = self.agent.data.get(DATA_NAME_LOADED_SKILLS)
        if not names:
            return
        content = "\n\n".join(skills.load_skill_for_agent(skill_name=name, agent=self.agent) for name in names)
        if content.strip():
            loop_data.extras_persistent["loaded_skills"] = self.agent.read_prompt(
                "agent.system.skills.loaded.md", skills=content.strip())
