"""The settings A0's plugin-settings modal loads, completed (our end of A0's ``Plugins._get_config``): a saved
``config.json`` may lack newer keys or hold values in another form than the panel's, so the modal gets the settings
the plugin uses and Save writes every key. A0 runs this for every plugin's modal, so it imports only core: a
missing aiohttp must not break another plugin's. State: none."""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, Final

import yaml

from ..core.config import canonical_settings
from ..core.errors import ConfigError
from . import PLUGIN_NAME

log = logging.getLogger("a0_reranker")
DEFAULT_CONFIG_FILE: Final = Path(__file__).resolve().parent.parent / "default_config.yaml"


def load_default_settings() -> dict[str, Any]:
    """The plugin folder's ``default_config.yaml`` (core reads no files: it is read here, on the A0 side)."""
    with DEFAULT_CONFIG_FILE.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    if not isinstance(data, dict):
        raise ConfigError([f"{DEFAULT_CONFIG_FILE.name}: expected a mapping of settings"])
    return data


def complete_loaded(data: MutableMapping[str, Any]) -> None:
    """Complete the reply's settings when they are this plugin's. Never raises: it would fail A0's request."""
    try:
        result = data.get("result")
        ours = _request_of(data).get("plugin_name") == PLUGIN_NAME
        if ours and isinstance(result, dict) and isinstance(result.get("data"), Mapping):
            result["data"] = completed(result["data"])
    except Exception:
        log.exception("a0_reranker: could not complete the settings the settings modal loaded")


def completed(saved: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults, then every saved key with a value, each as the plugin reads it: a hand-edited ``"AUTO"``,
    ``"yes"`` or list of replicas would otherwise show as a blank choice, a refused toggle or a bad field."""
    return canonical_settings({**load_default_settings(),
                               **{key: value for key, value in saved.items() if value is not None}})


def _request_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The modal's request, ``_get_config(self, input)``: positional, as A0 calls it, or by keyword."""
    kwargs, args = data.get("kwargs"), data.get("args")
    if isinstance(kwargs, Mapping) and isinstance(kwargs.get("input"), Mapping):
        return kwargs["input"]
    if isinstance(args, tuple) and len(args) >= 2 and isinstance(args[1], Mapping):
        return args[1]
    return {}
