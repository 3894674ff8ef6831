"""A0 `extensions/python/system_prompt/_13_skills_prompt.py`: one line per skill the agent can see,
`**<name>** <description>` (the name cut to 100 characters, the description to 500, newlines made
spaces), in `agent.system.skills.md`; nothing when there is no skill."""

from __future__ import annotations

from typing import Any

from helpers.extension import Extension

from helpers import skills


def skill_line(skill: Any) -> str:
    name = skill.name.strip().replace("\n", " ")[:100]
    return f"**{name}** {skill.description.replace(chr(10), ' ')[:500]}"


class SkillsPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if self.agent is None or system_prompt is None:
            return
        lines = [skill_line(skill) for skill in skills.list_skills(agent=self.agent)]
        if lines:
            system_prompt.append(self.agent.read_prompt("agent.system.skills.md", skills="\n".join(lines)))
