"""A0 `helpers/skills.py` (v1.7), reduced: `SKILL.md` discovery, parsing, validation and loading.

- `get_skill_roots(agent)`: with an agent, `subagents.get_paths(agent, "skills")` (project, profile,
  `usr/`, each enabled plugin, then the root's `skills/`); without one, every root globbed, enabled
  or not.
- `skill_from_markdown`: YAML frontmatter between `---` fences at the top; `name` (alias `skill`),
  `description` (aliases `when_to_use`, `summary`), `triggers` and its aliases, `tags`,
  `allowed-tools` and its aliases; `validate_skill` rejects a name outside `^[a-z0-9-]+$`, 1-64
  characters, with a leading, trailing or double hyphen, and a description missing or over 1024.
- `list_skills(agent)`: every valid skill of every root, de-duplicated by normalised name for an
  agent (the first root wins); `find_skill` matches the name or the folder name.
- `load_skill_for_agent`: the text the loaded-skills extension puts into the prompt extras: name,
  path, metadata, description, the body, and the skill's other files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from helpers import files, subagents

if TYPE_CHECKING:
    from agent import Agent

_NAME = re.compile(r"^[a-z0-9-]+$")


@dataclass(slots=True)
class Skill:
    name: str
    description: str
    path: Path
    skill_md_path: Path
    version: str = ""
    tags: list[str] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)
    allowed_tools: list[str] = field(default_factory=list)
    content: str = ""


def get_skill_roots(agent: Agent | None = None) -> list[str]:
    if agent:
        return subagents.get_paths(agent, "skills")
    patterns = ("usr/projects/*/.a0proj/agents/*/skills", "usr/projects/*/.a0proj/skills", "usr/agents/*/skills",
                "agents/*/skills", "plugins/*/skills", "usr/plugins/*/skills", "plugins/*/agents/*/skills",
                "usr/plugins/*/agents/*/skills")
    found = [path for pattern in patterns for path in files.find_existing_paths_by_pattern(pattern)]
    return [files.get_abs_path("skills"), files.get_abs_path("usr/skills"), *found]


def discover_skill_md_files(root: Path) -> list[Path]:
    if not root.exists():
        return []
    found = [p for p in root.rglob("SKILL.md")
             if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)]
    return sorted(found, key=str)


def _coerce_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    if isinstance(value, str):
        parts = value.split(",") if "," in value else value.split()
        return [p.strip() for p in parts if p.strip()]
    return [str(value).strip()]


def _normalize_name(name: str) -> str:
    return re.sub(r"\s+", "-", (name or "").strip().lower())


def split_frontmatter(markdown: str) -> tuple[dict[str, Any], str, list[str]]:
    lines = (markdown or "").splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None or lines[start].strip() != "---":
        return {}, markdown.strip(), ["Missing YAML frontmatter"]
    end = next((j for j in range(start + 1, len(lines)) if lines[j].strip() == "---"), None)
    if end is None:
        return {}, markdown.strip(), ["Unterminated YAML frontmatter"]
    try:
        parsed = yaml.safe_load("\n".join(lines[start + 1:end])) or {}
    except yaml.YAMLError:
        return {}, "", ["Invalid YAML frontmatter"]
    if not isinstance(parsed, dict):
        return {}, "", ["Frontmatter must be a mapping"]
    return parsed, "\n".join(lines[end + 1:]).strip(), []


def skill_from_markdown(skill_md_path: Path, *, include_content: bool = False) -> Skill | None:
    try:
        text = skill_md_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fm, body, errors = split_frontmatter(text)
    if errors:
        return None
    skill = Skill(
        name=str(fm.get("name") or fm.get("skill") or "").strip(),
        description=str(fm.get("description") or fm.get("when_to_use") or fm.get("summary") or "").strip(),
        path=skill_md_path.parent,
        skill_md_path=skill_md_path,
        version=str(fm.get("version") or "").strip(),
        tags=_coerce_list(fm.get("tags") or fm.get("tag")),
        triggers=_coerce_list(fm.get("triggers") or fm.get("trigger_patterns") or fm.get("trigger")
                              or fm.get("activation")),
        allowed_tools=_coerce_list(fm.get("allowed-tools") or fm.get("allowed_tools") or fm.get("tools")),
        content=body if include_content else "",
    )
    return None if validate_skill(skill) else skill


def validate_skill(skill: Skill) -> list[str]:
    issues = []
    name, desc = skill.name.strip(), skill.description.strip()
    if not name or not 1 <= len(name) <= 64 or not _NAME.match(name):
        issues.append("name must be 1-64 lowercase letters, digits and hyphens")
    if name.startswith("-") or name.endswith("-") or "--" in name:
        issues.append("name must not start or end with a hyphen, nor contain two in a row")
    if not desc or len(desc) > 1024:
        issues.append("description is required, at most 1024 characters")
    return issues


def list_skills(agent: Agent | None = None, include_content: bool = False) -> list[Skill]:
    skills = [s for root in get_skill_roots(agent) for md in discover_skill_md_files(Path(root))
              if (s := skill_from_markdown(md, include_content=include_content))]
    if not agent:
        return skills
    by_name: dict[str, Skill] = {}
    for s in skills:
        by_name.setdefault(_normalize_name(s.name) or _normalize_name(s.path.name), s)
    return list(by_name.values())


def find_skill(skill_name: str, agent: Agent | None = None, include_content: bool = False) -> Skill | None:
    target = _normalize_name(skill_name)
    for root in get_skill_roots(agent) if target else []:
        for md in discover_skill_md_files(Path(root)):
            s = skill_from_markdown(md, include_content=include_content)
            if s and target in (_normalize_name(s.name), _normalize_name(s.path.name)):
                return s
    return None


def load_skill_for_agent(skill_name: str, agent: Agent | None = None) -> str:
    skill = find_skill(skill_name, agent=agent, include_content=True)
    if not skill:
        return f"Error: skill '{skill_name}' not found"
    lines = [f"Skill: {skill.name}", f"Path: {skill.path}"]
    metadata = [("Version", skill.version), ("Tags", ", ".join(skill.tags)),
                ("Allowed tools", ", ".join(skill.allowed_tools)), ("Triggers", ", ".join(skill.triggers))]
    lines += [f"{label}: {value}" for label, value in metadata if value]
    lines += ["", "Description:", skill.description, "", "Content (SKILL.md body):", skill.content or "(empty)", ""]
    others = sorted(str(p.relative_to(skill.path)) for p in skill.path.rglob("*") if p.is_file() and p.name != "SKILL.md")
    lines += ["Files (use skills_tool method=read_file to open):", *others] if others else ["No additional files found."]
    return "\n".join(lines)
