"""Read the plugin's settings the way A0 resolves them, merged over ``default_config.yaml``.

A0's ``get_plugin_config(name, agent)`` returns the first ``config.json`` found along the project,
agent-profile and global scopes, or the defaults when there is none, and never merges: a file saved
by an older version lacks newer keys. We merge it over our defaults. Outside A0 (the standalone
package, the CLI) the plugin folder's own ``config.json`` is read if present.

Scopes (``per_project_config`` and ``per_agent_config`` in plugin.yaml): a recall reads the settings
of its own agent, so a sub-agent whose profile has its own ``config.json`` uses that one (another
reranker, or ``rerank_enabled: false`` for none) while the others keep theirs. Without an agent, a
``Scope`` names a project and an agent profile as A0's settings modal selects them.

Whether the plugin is on for an agent (``enabled_for``): A0 calls no hook on disable, so we ask at the
time of use. ``get_enabled_plugins(agent)`` reads the toggle files (``.toggle-0``/``.toggle-1``) at
global, project and agent-profile scope; A0 caches it until a plugin change, so asking per recall is
cheap.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..core.config import DEFAULT_CONFIG_FILE, RerankerConfig, config_from_settings, load_default_settings
from ..core.errors import ConfigError
from ..core.recall_budget import NO_LLM_STEPS, RecallSteps
from . import PLUGIN_NAME

log = logging.getLogger("a0_reranker")
PLUGIN_DIR = DEFAULT_CONFIG_FILE.parent
MEMORY_PLUGIN: Final = "_memory"


def a0_plugins() -> Any | None:
    """A0's ``helpers.plugins`` module, or None outside Agent Zero (the standalone package, the CLI)."""
    try:
        plugins = importlib.import_module("helpers.plugins")
    except Exception:
        return None
    return plugins if callable(getattr(plugins, "get_plugin_config", None)) else None


def enabled_for(agent: Any) -> bool:
    """The plugin is installed and switched on in this agent's scope (False outside A0 or on error)."""
    plugins = a0_plugins()
    if plugins is None:
        return False
    try:
        return PLUGIN_NAME in plugins.get_enabled_plugins(agent)
    except Exception:
        log.debug("a0_reranker: could not read the enabled plugins", exc_info=True)
        return False


def enabled_in(project_name: str, agent_profile: str) -> bool:
    """The toggle of a named scope as A0's settings modal reads it: the first ``.toggle-1``/``.toggle-0``
    found from that scope up to the global one (none: on). False outside A0 or on error."""
    plugins = a0_plugins()
    if plugins is None:
        return False
    try:
        found = plugins.find_plugin_assets(plugins.TOGGLE_FILE_PATTERN, plugin_name=PLUGIN_NAME,
                                           project_name=project_name, agent_profile=agent_profile, only_first=True)
    except Exception:
        log.debug("a0_reranker: could not read the toggle of a scope", exc_info=True)
        return False
    return not found or not str(found[0].get("path", "")).endswith(".toggle-0")


def installed() -> bool:
    """The plugin folder is still there (a manual ``rm -rf`` calls no hook)."""
    plugins = a0_plugins()
    if plugins is None:
        return False
    try:
        return plugins.find_plugin_dir(PLUGIN_NAME) is not None
    except Exception:
        return False


_SCOPE_NAME: Final = re.compile(r"^(?!\.{1,2}$)[^/\\\x00]{0,255}$")  # one folder name (or "" for all): no path


@dataclass(frozen=True)
class Scope:
    """A project and an agent profile by name; ``""`` is A0's "Global" and "All profiles"."""

    project_name: str = ""
    agent_profile: str = ""

    def __post_init__(self) -> None:
        for name in (self.project_name, self.agent_profile):
            if not isinstance(name, str) or not _SCOPE_NAME.match(name):
                raise ValueError(f"not a project or agent profile name: {name!r}")

    @property
    def is_global(self) -> bool:
        return not (self.project_name or self.agent_profile)


def scope_labels(scope: Scope) -> dict[str, str]:
    """The scope's names as A0's modal shows them: a project's title and an agent profile's label (the
    lists behind its selectors), or the names themselves; ``""`` for Global and All profiles."""
    return {"project_label": _label(scope.project_name, _project_labels),
            "agent_profile_label": _label(scope.agent_profile, _profile_labels)}


def _label(name: str, labels: Callable[[], dict[str, str]]) -> str:
    if not name:
        return ""
    try:
        return labels().get(name) or name
    except Exception:  # outside A0, or A0 could not list them: the name says it
        log.debug("a0_reranker: could not read the scope's labels", exc_info=True)
        return name


def _project_labels() -> dict[str, str]:
    projects = importlib.import_module("helpers.projects").get_active_projects_list()
    return {str(p.get("name")): str(p.get("title") or "") for p in projects}


def _profile_labels() -> dict[str, str]:
    profiles = importlib.import_module("helpers.subagents").get_all_agents_list()
    return {str(p.get("key")): str(p.get("label") or "") for p in profiles}


def saved_settings(agent: Any = None, scope: Scope | None = None) -> dict[str, Any]:
    """What the user saved for the agent's scope, or for ``scope`` (A0's lookup), without defaults."""
    plugins = a0_plugins()
    if plugins is None:
        return _read_json(PLUGIN_DIR / "config.json")
    if scope is None or scope.is_global:
        found = plugins.get_plugin_config(PLUGIN_NAME, agent)
    else:
        found = plugins.get_plugin_config(PLUGIN_NAME, agent, project_name=scope.project_name,
                                          agent_profile=scope.agent_profile)
    return dict(found) if isinstance(found, Mapping) else {}


def recall_steps(agent: Any = None, scope: Scope | None = None) -> RecallSteps:
    """Which of A0's LLM recall steps are on for the agent's (or ``scope``'s) ``_memory`` settings: they
    spend part of the recall's time limit before and after our searches. None outside A0 or on error."""
    plugins = a0_plugins()
    if plugins is None:
        return NO_LLM_STEPS
    try:
        if scope is None or scope.is_global:
            found = plugins.get_plugin_config(MEMORY_PLUGIN, agent)
        else:
            found = plugins.get_plugin_config(MEMORY_PLUGIN, agent, project_name=scope.project_name,
                                              agent_profile=scope.agent_profile)
    except Exception:
        log.debug("a0_reranker: could not read the _memory settings", exc_info=True)
        return NO_LLM_STEPS
    if not isinstance(found, Mapping):
        return NO_LLM_STEPS
    return RecallSteps(query_prep=found.get("memory_recall_query_prep") is True,
                       post_filter=found.get("memory_recall_post_filter") is True)


def plugin_settings(agent: Any = None, scope: Scope | None = None) -> dict[str, Any]:
    """Defaults, then the saved settings of the agent's (or ``scope``'s) scope on top."""
    return {**load_default_settings(), **saved_settings(agent, scope)}


def resolve_config(config: RerankerConfig | Mapping[str, Any] | None = None, agent: Any = None) -> RerankerConfig:
    """The config a call uses: ``None`` = the plugin's settings; a dict overrides them; a config is used as is.

    Raises ``ConfigError`` naming every bad key (or ``config`` itself when it is neither).
    """
    if isinstance(config, RerankerConfig):
        return config
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError([f"config: expected a dict of rerank_* settings or a RerankerConfig, "
                           f"got {type(config).__name__}"])
    settings = plugin_settings(agent)
    if config:
        settings.update(config)
    return config_from_settings(settings)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("a0_reranker: ignoring unreadable %s: %s", path.name, exc)
        return {}
    return data if isinstance(data, dict) else {}
