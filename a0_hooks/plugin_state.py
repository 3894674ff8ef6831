"""Is the plugin on for this agent? A0 calls no hook on disable, so we ask at the time of use.

``get_enabled_plugins(agent)`` reads the toggle files (``.toggle-0``/``.toggle-1``) at global,
project and agent-profile scope; A0 caches it until a plugin change, so asking per recall is cheap.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from . import PLUGIN_NAME

log = logging.getLogger("a0_reranker")


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
