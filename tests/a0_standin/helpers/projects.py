"""A0 `helpers/projects.py`, reduced: project folders and the context's active project."""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers import files

if TYPE_CHECKING:
    from agent import AgentContext

PROJECTS_PARENT_DIR = "usr/projects"
PROJECT_META_DIR = ".a0proj"
CONTEXT_DATA_KEY_PROJECT = "project"


def get_projects_parent_folder() -> str:
    return files.get_abs_path(PROJECTS_PARENT_DIR)


def get_project_folder(name: str) -> str:
    return files.get_abs_path(get_projects_parent_folder(), name)


def get_project_meta(name: str, *sub_dirs: str) -> str:
    return files.get_abs_path(get_project_folder(name), PROJECT_META_DIR, *sub_dirs)


def get_context_project_name(context: AgentContext) -> str | None:
    return context.get_data(CONTEXT_DATA_KEY_PROJECT)


def activate_project(context_id: str, name: str) -> None:
    from agent import AgentContext

    context = AgentContext.get(context_id)
    if context is None:
        raise ValueError(f"Context {context_id} not found")
    context.set_data(CONTEXT_DATA_KEY_PROJECT, name)
    context.set_output_data(CONTEXT_DATA_KEY_PROJECT, {"name": name, "title": name, "color": ""})


def deactivate_project(context_id: str) -> None:
    from agent import AgentContext

    context = AgentContext.get(context_id)
    if context is None:
        raise ValueError(f"Context {context_id} not found")
    context.set_data(CONTEXT_DATA_KEY_PROJECT, None)
    context.set_output_data(CONTEXT_DATA_KEY_PROJECT, None)


def get_active_projects_list() -> list[dict[str, str]]:
    """Every folder under `usr/projects/`, with the `title` of its `.a0proj/project.json`, sorted by name."""
    import json
    import os

    parent = get_projects_parent_folder()
    projects: list[dict[str, str]] = []
    for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        if not os.path.isdir(os.path.join(parent, name)):
            continue
        meta = get_project_meta(name, "project.json")
        data = json.loads(files.read_file(meta)) if files.exists(meta) else {}
        projects.append({"name": name, "title": str(data.get("title", "")), "description": "", "color": ""})
    return projects
