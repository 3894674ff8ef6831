"""A0 `helpers/subagents.get_paths`: the folder priority used for extensions, tools, prompts and
toggles: project agent dir, project `.a0proj`, `usr/agents/<profile>`, enabled
plugins' `agents/<profile>`, `agents/<profile>`, `usr/`, each enabled plugin (name order), then the
default root."""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers import cache, files

if TYPE_CHECKING:
    from agent import Agent

USER_DIR = "usr"
DEFAULT_AGENTS_DIR = "agents"
USER_AGENTS_DIR = "usr/agents"
PATHS_CACHE_AREA = "subagent_paths(plugins)"

cache.toggle_area(PATHS_CACHE_AREA, False)  # A0 v1.7 keeps this area switched off


def _project_paths(
    agent: Agent, profile: str, subpaths: tuple[str, ...], check: tuple[str, ...], must_exist: bool
) -> list[str]:
    from helpers import projects

    project = projects.get_context_project_name(agent.context) or ""
    paths: list[str] = []
    if project and profile:
        agent_dir = projects.get_project_meta(project, "agents", profile)
        if files.exists(files.get_abs_path(agent_dir, *check)):
            paths.append(files.get_abs_path(agent_dir, *subpaths))
    if project:
        path = projects.get_project_meta(project, *subpaths)
        if not must_exist or files.exists(path):
            paths.append(path)
    return paths


def _profile_paths(
    agent: Agent | None,
    profile: str,
    subpaths: tuple[str, ...],
    check: tuple[str, ...],
    must_exist: bool,
    include_plugins: bool,
) -> list[str]:
    from helpers import plugins

    bases = [files.get_abs_path(USER_AGENTS_DIR, profile)]
    if include_plugins:
        bases += plugins.get_enabled_plugin_paths(agent, "agents", profile)
    bases.append(files.get_abs_path(DEFAULT_AGENTS_DIR, profile))
    return [
        files.get_abs_path(base, *subpaths)
        for base in bases
        if not must_exist or files.exists(files.get_abs_path(base, *check))
    ]


def get_paths(
    agent: Agent | None,
    *subpaths: str,
    must_exist_completely: bool = True,
    include_project: bool = True,
    include_user: bool = True,
    include_default: bool = True,
    include_plugins: bool = True,
    default_root: str = "",
) -> list[str]:
    """Folders for `subpaths`, highest priority first."""
    from helpers import plugins

    check = subpaths if must_exist_completely else ()
    profile = agent.config.profile if agent and agent.config.profile else ""
    paths: list[str] = []
    if include_project and agent:
        paths += _project_paths(agent, profile, subpaths, check, must_exist_completely)
    if profile:
        paths += _profile_paths(agent, profile, subpaths, check, must_exist_completely, include_plugins)
    if include_user:
        path = files.get_abs_path(USER_DIR, *subpaths)
        if not must_exist_completely or files.exists(path):
            paths.append(path)
    if include_plugins:
        for plugin_dir in plugins.get_enabled_plugin_paths(agent):
            path = files.get_abs_path(plugin_dir, *subpaths)
            if (not must_exist_completely or files.exists(path)) and path not in paths:
                paths.append(path)
    if include_default:
        path = files.get_abs_path(default_root, *subpaths)
        if not must_exist_completely or files.exists(path):
            paths.append(path)
    return paths


def get_agents_roots() -> list[str]:
    """Folders holding agent profiles: `agents/`, enabled plugins' `agents/`, `usr/agents/`, projects'."""
    from helpers import plugins

    paths = [
        files.get_abs_path(DEFAULT_AGENTS_DIR),
        *plugins.get_enabled_plugin_paths(None, "agents"),
        files.get_abs_path(USER_AGENTS_DIR),
        *files.find_existing_paths_by_pattern("usr/projects/*/.a0proj/agents"),
    ]
    return [p for i, p in enumerate(paths) if p and p not in paths[:i] and files.is_dir(p)]


def get_all_agents_list() -> list[dict[str, str]]:
    """`[{"key", "label"}]` of every profile folder with an `agent.yaml` (its `name`, else the folder;
    its `title`, else the name), merged over the roots and sorted by key, as `/api/agents` lists them."""
    merged: dict[str, str] = {}
    for root in get_agents_roots():
        for sub in files.get_subdirectories(root):
            meta_path = files.get_abs_path(root, sub, "agent.yaml")
            if not files.exists(meta_path):
                continue
            meta = files.read_file_yaml(meta_path) or {}
            name = str(meta.get("name") or sub)
            merged[name] = str(meta.get("title") or merged.get(name) or name)
    return [{"key": key, "label": merged[key]} for key in sorted(merged)]
