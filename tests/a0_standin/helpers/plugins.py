"""A0 `helpers/plugins.py` (v1.7): discovery, config lookup, toggles, hooks, uninstall.

Reproduced details that plugins trip over:
- `get_plugin_config` takes the FIRST `config.json` found and never merges it with the defaults;
  only when none exists is `default_config.yaml` loaded and the `A0_SET_<plugin>__<key>` env
  override applied; the `get_plugin_config` hook runs last.
- `find_plugin_assets` checks the project-level folder only when no agent profile is given (a v1.7
  quirk: with both a project and a profile, `.a0proj/plugins/<n>/config.json` is skipped).
- Toggle files `.toggle-1`/`.toggle-0` flip the state level by level; no hook runs on toggling.
- `call_plugin_hook` loads `hooks.py` as module `hooks` (not in `sys.modules`), passes only the
  declared keyword arguments and runs coroutine hooks with `asyncio.run`.
- `after_plugin_change(..., python_change=True)` purges `plugins` / `usr.plugins` from `sys.modules`.
"""

from __future__ import annotations

import asyncio
import glob
import inspect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from helpers import cache, files, functions, modules
from helpers import yaml as yaml_helper
from helpers.extension import extensible

if TYPE_CHECKING:
    from agent import Agent

ToggleState = Literal["enabled", "disabled", "advanced"]

META_FILE_NAME = "plugin.yaml"
CONFIG_FILE_NAME = "config.json"
CONFIG_DEFAULT_FILE_NAME = "default_config.yaml"
DISABLED_FILE_NAME = ".toggle-0"
ENABLED_FILE_NAME = ".toggle-1"
TOGGLE_FILE_PATTERN = ".toggle-[01]"

HOOKS_SCRIPT = "hooks.py"
HOOKS_CACHE_AREA = "plugin_hooks(plugins)"
PLUGINS_LIST_CACHE_AREA = "plugins_list(plugins)"
ENABLED_PLUGINS_LIST_CACHE_AREA = "enabled_plugins(plugins)"
ENABLED_PLUGINS_PATHS_CACHE_AREA = "enabled_plugins_paths(plugins)"


class PluginAssetFile(TypedDict):
    path: str
    project_name: str
    agent_profile: str


@dataclass
class PluginMetadata:
    """`plugin.yaml` model. Unknown keys are ignored; a non-string `version` (e.g. `1.0`) is
    rejected as pydantic v2 does, which makes A0 report "Failed to load plugin"."""

    name: str = ""
    title: str = ""
    description: str = ""
    version: str = ""
    settings_sections: list[str] = field(default_factory=list)
    per_project_config: bool = False
    per_agent_config: bool = False
    always_enabled: bool = False

    @classmethod
    def model_validate(cls, data: Any) -> PluginMetadata:
        if not isinstance(data, dict):
            raise ValueError("plugin.yaml must be a mapping")
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            expected = {"str": str, "bool": bool}.get(str(f.type), list)
            if not isinstance(value, expected):
                raise ValueError(f"{f.name}: expected {f.type}, got {type(value).__name__}")
            values[f.name] = value
        return cls(**values)


# --- discovery -------------------------------------------------------------------------------


def get_plugin_roots(plugin_name: str = "") -> list[str]:
    """`[usr/plugins/<name>, plugins/<name>]`: user plugins first."""
    return [
        files.get_abs_path(files.USER_DIR, files.PLUGINS_DIR, plugin_name),
        files.get_abs_path(files.PLUGINS_DIR, plugin_name),
    ]


def get_plugins_list() -> list[str]:
    """Names of folders holding a `plugin.yaml`, user root first, sorted, cached."""
    if cached := cache.get(PLUGINS_LIST_CACHE_AREA, ""):
        return cached
    result: list[str] = []
    for root in get_plugin_roots():
        if not Path(root).is_dir():
            continue
        for entry in Path(root).iterdir():
            visible = entry.is_dir() and not entry.name.startswith(".")
            if visible and entry.name not in result and files.exists(str(entry), META_FILE_NAME):
                result.append(entry.name)
    result.sort()
    cache.add(PLUGINS_LIST_CACHE_AREA, "", result)
    return result


def find_plugin_dir(plugin_name: str) -> str | None:
    """`usr/plugins/<name>` if it has a `plugin.yaml`, else `plugins/<name>`, else None."""
    if not plugin_name:
        return None
    for root in get_plugin_roots(plugin_name):
        if files.exists(root, META_FILE_NAME):
            return root
    return None


def get_plugin_meta(plugin_name: str) -> PluginMetadata | None:
    plugin_dir = find_plugin_dir(plugin_name)
    if not plugin_dir:
        return None
    return PluginMetadata.model_validate(files.read_file_yaml(files.get_abs_path(plugin_dir, META_FILE_NAME)))


def get_enabled_plugins(agent: Agent | None) -> list[str]:
    """Plugins ON for this agent's scope: toggles read from lowest to highest priority level
    (`plugins/<n>`, `usr/plugins/<n>`, then agent profile and project folders). Cached."""
    key = cache.determine_cache_key(agent)
    if cached := cache.get(ENABLED_PLUGINS_LIST_CACHE_AREA, key):
        return cached
    active = [name for name in get_plugins_list() if _is_enabled(name, agent)]
    cache.add(ENABLED_PLUGINS_LIST_CACHE_AREA, key, active)
    return active


def _is_enabled(plugin_name: str, agent: Agent | None) -> bool:
    paths = get_plugin_roots(plugin_name)
    if agent:
        from helpers import subagents

        paths = (
            subagents.get_paths(
                agent,
                files.PLUGINS_DIR,
                plugin_name,
                must_exist_completely=True,
                include_default=False,
                include_user=False,
                include_plugins=False,
                include_project=True,
            )
            + paths
        )
    return determined_toggle_from_paths(True, reversed(paths))


def determined_toggle_from_paths(default: bool, paths: Iterable[str]) -> bool:
    """Each level may flip the state: ON + `.toggle-0` gives OFF, OFF + `.toggle-1` gives ON."""
    enabled = default
    for path in paths:
        marker = DISABLED_FILE_NAME if enabled else ENABLED_FILE_NAME
        if files.exists(files.get_abs_path(path, marker)):
            enabled = not enabled
    return enabled


def get_enabled_plugin_paths(agent: Agent | None, *subpaths: str) -> list[str]:
    """Folders (or glob matches of `subpaths`) inside each enabled plugin, in plugin-name order."""
    key = cache.determine_cache_key(agent, *subpaths)
    if cached := cache.get(ENABLED_PLUGINS_PATHS_CACHE_AREA, key):
        return cached
    paths: list[str] = []
    for plugin in get_enabled_plugins(agent):
        base_dir = find_plugin_dir(plugin)
        if not base_dir:
            continue
        if not subpaths:
            paths.append(base_dir)
        else:
            paths.extend(files.find_existing_paths_by_pattern(files.get_abs_path(base_dir, *subpaths)))
    cache.add(ENABLED_PLUGINS_PATHS_CACHE_AREA, key, paths)
    return paths


def get_toggle_state(plugin_name: str) -> ToggleState:
    meta = get_plugin_meta(plugin_name)
    if not meta:
        return "disabled"
    if meta.always_enabled:
        return "enabled"
    state: ToggleState = (
        "enabled" if determined_toggle_from_paths(True, reversed(get_plugin_roots(plugin_name))) else "disabled"
    )
    if meta.per_agent_config or meta.per_project_config:
        toggles = find_plugin_assets(
            TOGGLE_FILE_PATTERN,
            plugin_name=plugin_name,
            project_name="*" if meta.per_project_config else "",
            agent_profile="*" if meta.per_agent_config else "",
        )
        if any(t["project_name"] or t["agent_profile"] for t in toggles):
            state = "advanced"
    return state


# --- cache and module refresh -------------------------------------------------


@extensible
def after_plugin_change(plugin_names: list[str] | None = None, python_change: bool = False) -> None:
    clear_plugin_cache(plugin_names)
    if python_change:
        refresh_plugin_modules(plugin_names)


def clear_plugin_cache(plugin_names: list[str] | None = None) -> None:
    for area in ("*(plugins)*", "*(extensions)*", "*(api)*"):
        cache.clear(area)


def refresh_plugin_modules(plugin_names: list[str] | None = None) -> list[str]:
    """Purge `plugins` if a changed name starts with `_`, `usr.plugins` otherwise; both if None."""
    purged: list[str] = []
    builtin = plugin_names is None or any(n.startswith("_") for n in plugin_names)
    user = plugin_names is None or any(not n.startswith("_") for n in plugin_names)
    if builtin:
        purged += modules.purge_namespace("plugins")
    if user:
        purged += modules.purge_namespace("usr.plugins")
    return purged


def purge_plugin_modules(plugin_names: list[str] | None = None) -> list[str]:
    """Stand-in convenience for what A0 does when a `.py` file under a plugin changes (watchdog ->
    `after_plugin_change(names, python_change=True)`): clear the plugin caches and purge modules.
    Default: every `usr.plugins.*` module leaves `sys.modules`. Returns the purged module names."""
    clear_plugin_cache(plugin_names)
    if plugin_names is None:
        return modules.purge_namespace("usr.plugins")
    return refresh_plugin_modules(plugin_names)


# --- config -------------------------------------------------------------------


def _load_config_file(file_path: str) -> Any:
    parse = json.loads if file_path.lower().endswith(".json") else yaml_helper.loads
    return parse(files.read_file(file_path))


@extensible
def get_plugin_config(
    plugin_name: str,
    agent: Agent | None = None,
    project_name: str | None = None,
    agent_profile: str | None = None,
) -> Any:
    """First `config.json` found by priority, else `default_config.yaml` (+ env), then the hook."""
    if project_name is None and agent is not None:
        from helpers import projects

        project_name = projects.get_context_project_name(agent.context)
    if agent_profile is None and agent is not None:
        agent_profile = agent.config.profile
    found = find_plugin_asset(
        plugin_name, CONFIG_FILE_NAME, project_name=project_name or "", agent_profile=agent_profile or ""
    )
    file_path = found["path"] if found else ""
    default_used = False
    if not file_path:
        plugin_dir = find_plugin_dir(plugin_name)
        if not plugin_dir:
            return None
        file_path = files.get_abs_path(plugin_dir, CONFIG_DEFAULT_FILE_NAME)
        default_used = True
    result = None
    if files.exists(file_path):
        result = _load_config_file(file_path)
        if default_used:
            _apply_defaults_from_env(plugin_name, result)
    return call_plugin_hook(
        plugin_name,
        "get_plugin_config",
        default=result,
        agent=agent,
        project_name=project_name,
        agent_profile=agent_profile,
    )


def get_default_plugin_config(plugin_name: str) -> Any:
    """The `get_default_plugin_config(file_path=...)` hook first, else `default_config.yaml`."""
    plugin_dir = find_plugin_dir(plugin_name)
    if not plugin_dir:
        return None
    file_path = files.get_abs_path(plugin_dir, CONFIG_DEFAULT_FILE_NAME)
    result = call_plugin_hook(plugin_name, "get_default_plugin_config", file_path=file_path)
    if result is None and files.exists(file_path):
        result = _load_config_file(file_path)
    return result


@extensible
def save_plugin_config(plugin_name: str, project_name: str, agent_profile: str, settings: dict) -> None:
    """Write `config.json` at the scope; the hook may transform it (None skips the write).
    Does not call `after_plugin_change`."""
    file_path = determine_plugin_asset_path(plugin_name, project_name, agent_profile, CONFIG_FILE_NAME)
    new_settings = call_plugin_hook(
        plugin_name,
        "save_plugin_config",
        default=settings,
        project_name=project_name,
        agent_profile=agent_profile,
        settings=settings,
    )
    if new_settings is not None and file_path:
        files.write_file(file_path, json.dumps(new_settings))


def _apply_defaults_from_env(plugin_name: str, config: Any) -> None:
    from helpers.settings import get_default_value

    def apply(prefix: list[str], value: dict[str, Any]) -> None:
        for key, child in value.items():
            value[key] = get_default_value("__".join([plugin_name, *prefix, key]), child)
            if isinstance(value[key], dict):
                apply([*prefix, key], value[key])

    if isinstance(config, dict):
        apply([], config)


# --- scoped assets ----------------------------------------------------------------------------


def determine_plugin_asset_path(plugin_name: str, project_name: str, agent_profile: str, *subpaths: str) -> str:
    """Target of a save/toggle: `usr/` or the project's `.a0proj/`, + `agents/<profile>`, +
    `plugins/<name>/...`. For a user plugin's global scope that is its own folder."""
    base = files.get_abs_path(files.USER_DIR)
    if project_name:
        from helpers import projects

        base = projects.get_project_meta(project_name)
    if agent_profile:
        base = files.get_abs_path(base, files.AGENTS_DIR, agent_profile)
    return files.get_abs_path(base, files.PLUGINS_DIR, plugin_name, *subpaths)


def find_plugin_asset(
    plugin_name: str, *subpaths: str, project_name: str = "", agent_profile: str = ""
) -> PluginAssetFile | None:
    found = find_plugin_assets(
        *subpaths,
        plugin_name=plugin_name,
        project_name=project_name,
        agent_profile=agent_profile,
        only_first=True,
    )
    return found[0] if found else None


def _segment_after(path: str, marker: str, last: bool = False) -> str:
    i = path.rfind(marker) if last else path.find(marker)
    if i == -1:
        return ""
    start = i + len(marker)
    end = path.find("/", start)
    return path[start:] if end == -1 else path[start:end]


def _asset_candidates(
    plugin_name: str, subpaths: tuple[str, ...], project_name: str, agent_profile: str
) -> list[tuple[str, str, str]]:
    """(path or glob, project, profile) in lookup priority order."""
    from helpers import projects, subagents

    tail = (files.PLUGINS_DIR, plugin_name, *subpaths)
    out: list[tuple[str, str, str]] = []
    if project_name:
        if agent_profile:
            out.append(
                (
                    projects.get_project_meta(project_name, files.AGENTS_DIR, agent_profile, *tail),
                    project_name,
                    agent_profile,
                )
            )
        if not agent_profile or agent_profile == "*":
            out.append((projects.get_project_meta(project_name, *tail), project_name, ""))
    if agent_profile:
        out.append((files.get_abs_path(subagents.USER_AGENTS_DIR, agent_profile, *tail), "", agent_profile))
        for plugin_base in get_enabled_plugin_paths(None):
            out.append((files.get_abs_path(plugin_base, files.AGENTS_DIR, agent_profile, *tail), "", agent_profile))
        out.append((files.get_abs_path(subagents.DEFAULT_AGENTS_DIR, agent_profile, *tail), "", agent_profile))
    out.append((files.get_abs_path(files.USER_DIR, *tail), "", ""))
    out.append((files.get_abs_path(*tail), "", ""))
    return out


def find_plugin_assets(
    *subpaths: str,
    plugin_name: str = "*",
    project_name: str = "*",
    agent_profile: str = "*",
    only_first: bool = False,
) -> list[PluginAssetFile]:
    """Every existing asset by priority (the `get_plugin_config` lookup order); `*` selectors glob and infer."""
    results: list[PluginAssetFile] = []
    for path, proj, profile in _asset_candidates(plugin_name, subpaths, project_name, agent_profile):
        if glob.has_magic(path):
            matches = files.find_existing_paths_by_pattern(path)
        else:
            matches = [path] if files.exists(path) else []
        for match in matches:
            results.append(
                {
                    "project_name": _segment_after(match, "/projects/") if proj == "*" else proj,
                    "agent_profile": _segment_after(match, "/agents/", last=True) if profile == "*" else profile,
                    "path": match,
                }
            )
            if only_first:
                return results
    return results


# --- toggles ----------------------------------------------------------------------------------


@extensible
def toggle_plugin(
    plugin_name: str,
    enabled: bool,
    project_name: str = "",
    agent_profile: str = "",
    clear_overrides: bool = False,
) -> None:
    """Replace the scope's toggle file, then clear the caches. No plugin hook is called."""
    if clear_overrides:
        for toggle in find_plugin_assets(TOGGLE_FILE_PATTERN, plugin_name=plugin_name):
            files.delete_file(toggle["path"])
    on_file = determine_plugin_asset_path(plugin_name, project_name, agent_profile, ENABLED_FILE_NAME)
    off_file = determine_plugin_asset_path(plugin_name, project_name, agent_profile, DISABLED_FILE_NAME)
    files.delete_file(on_file)
    files.delete_file(off_file)
    files.write_file(on_file if enabled else off_file, "")
    after_plugin_change([plugin_name])


# --- hooks and removal ---------------------------------------------------------


def call_plugin_hook(plugin_name: str, hook_name: str, default: Any = None, *args: Any, **kwargs: Any) -> Any:
    """Call `hooks.<hook_name>` with `default` and only the kwargs it declares; `default` if absent."""
    if not cache.has(HOOKS_CACHE_AREA, plugin_name):
        plugin_dir = find_plugin_dir(plugin_name)
        if not plugin_dir:
            return default
        script = files.get_abs_path(plugin_dir, HOOKS_SCRIPT)
        hooks = modules.import_module(script) if files.exists(script) else None
        cache.add(HOOKS_CACHE_AREA, plugin_name, hooks)
    else:
        hooks = cache.get(HOOKS_CACHE_AREA, plugin_name)
    hook = getattr(hooks, hook_name, None) if hooks else None
    if not hook:
        return default
    if inspect.iscoroutinefunction(hook):
        return asyncio.run(functions.safe_call(hook, *args, default=default, **kwargs))
    return functions.safe_call(hook, *args, default=default, **kwargs)


@extensible
def uninstall_plugin(plugin_name: str) -> None:
    """The `uninstall` hook, then `delete_plugin`."""
    call_plugin_hook(plugin_name, "uninstall")
    delete_plugin(plugin_name)


@extensible
def delete_plugin(plugin_name: str) -> None:
    """Delete a user plugin and its scoped asset folders; purge modules if it had `.py` files."""
    plugin_dir = find_plugin_dir(plugin_name)
    if not plugin_dir:
        raise FileNotFoundError(f"Plugin '{plugin_name}' not found")
    if not files.is_in_dir(plugin_dir, files.get_abs_path(files.USER_DIR, files.PLUGINS_DIR)):
        raise ValueError("Only custom plugins can be deleted")
    for asset in find_plugin_assets("", plugin_name=plugin_name):
        if not asset["path"].startswith(plugin_dir):
            files.delete_dir(asset["path"])
    python_change = bool(files.find_existing_paths_by_pattern(plugin_dir + "/**/*.py"))
    files.delete_dir(plugin_dir)
    after_plugin_change([plugin_name], python_change=python_change)
