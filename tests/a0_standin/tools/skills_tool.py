"""A0 `tools/skills_tool.py` (v1.7), reduced to the two methods v1.7 serves: `list` and `load`.

`skills_tool:list` lists every skill the agent can see, sorted by name, each description cut to 200
characters. `skills_tool:load` records the skill's name in `agent.data["loaded_skills"]` (the last 5
loads kept); the `message_loop_prompts_after` extension `_65_include_loaded_skills` then puts the
skill's whole text into the prompt extras on every loop. Errors come back as the tool's answer.
"""

from __future__ import annotations

from typing import Any

from helpers.tool import Response, Tool

from helpers import skills as skills_helper

DATA_NAME_LOADED_SKILLS = "loaded_skills"
MAX_LOADED_SKILLS = 5


class SkillsTool(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        method = str(kwargs.get("method") or self.args.get("method") or self.method or "").strip().lower()
        try:
            if method == "list":
                return Response(message=self._list(), break_loop=False)
            if method == "load":
                return Response(message=self._load(_normalize(str(kwargs.get("skill_name") or ""))), break_loop=False)
            return Response(message="Error: missing/invalid 'method'. Supported: list, load.", break_loop=False)
        except Exception as e:
            return Response(message=f"Error in skills_tool: {e}", break_loop=False)

    def _list(self) -> str:
        found = sorted(skills_helper.list_skills(agent=self.agent), key=lambda s: s.name.lower())
        if not found:
            return "No skills found."
        lines = [f"Available skills ({len(found)}):"]
        for s in found:
            desc = s.description.strip()
            desc = desc[:200].rstrip() + "…" if len(desc) > 200 else desc
            tags = f" tags={','.join(s.tags)}" if s.tags else ""
            version = f" v{s.version}" if s.version else ""
            lines.append(f"- {s.name}{version}{tags}: {desc}")
        return "\n".join([*lines, "", "Tip: use skills_tool method=search or method=load for details."])

    def _load(self, skill_name: str) -> str:
        if not skill_name:
            return "Error: 'skill_name' is required for method=load."
        skill = skills_helper.find_skill(skill_name, agent=self.agent)
        if not skill:
            return f"Error: skill not found: {skill_name!r}. Try skills_tool method=list or method=search."
        loaded = [name for name in self.agent.data.get(DATA_NAME_LOADED_SKILLS) or [] if name != skill.name]
        self.agent.data[DATA_NAME_LOADED_SKILLS] = [*loaded, skill.name][-MAX_LOADED_SKILLS:]
        return f"Loaded skill '{skill.name}' into EXTRAS."


def _normalize(skill_name: str) -> str:
    name = skill_name.strip()
    if name.startswith("**") and name.endswith("**"):
        name = name[2:-2]
    return name.strip()
