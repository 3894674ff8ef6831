"""Read the plugin's settings the way A0 resolves them, merged over ``default_config.yaml``.

A0's ``get_plugin_config(name, agent)`` returns the first ``config.json`` found along the project,
agent-profile and global scopes, or the defaults when there is none, and never merges: a file saved
by an older version lacks newer keys. We merge it over our defaults. Outside A0 (the standalone
package, the CLI) the plugin folder's own ``config.json`` is read if present.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.config import DEFAULT_CONFIG_FILE, RerankerConfig, load_default_settings
from . import PLUGIN_NAME
from .plugin_state import a0_plugins

log = logging.getLogger("a0_reranker")
PLUGIN_DIR = DEFAULT_CONFIG_FILE.parent


def saved_settings(agent: Any = None) -> dict[str, Any]:
    """What the user saved for this scope (A0's lookup), without defaults."""
    plugins = a0_plugins()
    if plugins is not None:
        found = plugins.get_plugin_config(PLUGIN_NAME, agent)
        return dict(found) if isinstance(found, Mapping) else {}
    return _read_json(PLUGIN_DIR / "config.json")


def plugin_settings(agent: Any = None) -> dict[str, Any]:
    """Defaults, then the saved settings of the agent's scope on top."""
    return {**load_default_settings(), **saved_settings(agent)}


def resolve_config(config: RerankerConfig | Mapping[str, Any] | None = None, agent: Any = None) -> RerankerConfig:
    """The config a call uses: ``None`` = the plugin's settings; a dict overrides them; a config is used as is.

    Raises ``ConfigError`` naming every bad key.
    """
    if isinstance(config, RerankerConfig):
        return config
    settings = plugin_settings(agent)
    if config:
        settings.update(config)
    return RerankerConfig.from_settings(settings)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("a0_reranker: ignoring unreadable %s: %s", path.name, exc)
        return {}
    return data if isinstance(data, dict) else {}
