"""What A0's plugin-settings modal loads of the plugin's settings: complete, on the server side.

The modal reads a saved ``config.json`` as it is (A0's ``api/plugins.py``, ``Plugins._get_config``), and A0
never merges it over the defaults: a file saved by an older version lacks the newer keys, and one whose
``rerank_endpoint`` lists the replicas holds a list where the panel's field holds text. The plugin's
extension at the end of ``_get_config`` hands the modal the settings the plugin itself uses instead:
every key, a missing (or null) one with its default, a list of replicas joined as the plugin joins it.
The modal takes them as loaded, so this is no unsaved change of the user's, and Save writes every key.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

from ..core.coercion import to_endpoints
from ..core.config import load_default_settings
from . import PLUGIN_NAME

log = logging.getLogger("a0_reranker")
ENDPOINT_KEY = "rerank_endpoint"


def complete_loaded(data: MutableMapping[str, Any]) -> None:
    """The end handler of ``Plugins._get_config``: complete the reply's settings when they are this
    plugin's. Never raises (an error in an extension would fail A0's own request)."""
    try:
        result = data.get("result")
        if _request_of(data).get("plugin_name") != PLUGIN_NAME or not isinstance(result, dict):
            return
        if isinstance(result.get("data"), Mapping):
            result["data"] = completed(result["data"])
    except Exception:
        log.exception("a0_reranker: could not complete the settings the settings modal loaded")


def completed(saved: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults, then every saved key that has a value (the file's order after the defaults' own)."""
    merged = {**load_default_settings(), **{key: value for key, value in saved.items() if value is not None}}
    if isinstance(merged.get(ENDPOINT_KEY), list | tuple):
        with contextlib.suppress(ValueError):  # entries that are not text: left as saved, for the checks to name
            merged[ENDPOINT_KEY] = to_endpoints(merged[ENDPOINT_KEY])
    return merged


def _request_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The modal's request, ``_get_config(self, input)``: positional, as A0 calls it, or by keyword."""
    kwargs, args = data.get("kwargs"), data.get("args")
    if isinstance(kwargs, Mapping) and isinstance(kwargs.get("input"), Mapping):
        return kwargs["input"]
    if isinstance(args, tuple) and len(args) >= 2 and isinstance(args[1], Mapping):
        return args[1]
    return {}
