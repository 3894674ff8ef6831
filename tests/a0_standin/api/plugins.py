"""A0 `api/plugins.py` (v1.7): `POST /api/plugins`, the actions the plugin-settings modal uses.

As in A0, each action is an `@extension.extensible` method of `Plugins`, and A0 loads this file by
path under its stem, so the methods' extension points are `_functions/plugins/Plugins/<method>/{start,end}`
(a plugin's `extensions/python/_functions/plugins/Plugins/_get_config/end/` sees every settings read).
`get_config` returns the first-found `config.json` as it is, or `get_plugin_config(name)` (the
defaults) when there is none; `get_default_config` the defaults; `save_config` saves the settings
posted for the scope. Not reproduced: the other actions (toggles, lists, deletion, docs, scripts).
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.api import ApiHandler, Request, Response

from helpers import extension, plugins


class Plugins(ApiHandler):
    async def process(self, input: dict, request: Request) -> dict | Response:
        action = input.get("action", "")
        if action == "get_config":
            return self._get_config(input)
        if action == "get_default_config":
            return self._get_default_config(input)
        if action == "save_config":
            return self._save_config(input)
        return Response(status=400, response=f"Unknown action: {action}")

    @extension.extensible
    def _get_config(self, input: dict) -> dict | Response:
        plugin_name = input.get("plugin_name", "")
        if not plugin_name:
            return Response(status=400, response="Missing plugin_name")
        found = plugins.find_plugin_assets(plugins.CONFIG_FILE_NAME, plugin_name=plugin_name,
                                           project_name=input.get("project_name", ""),
                                           agent_profile=input.get("agent_profile", ""), only_first=True)
        if found:
            entry = found[0]
            return {"ok": True, "loaded_path": entry["path"], "loaded_project_name": entry["project_name"],
                    "loaded_agent_profile": entry["agent_profile"],
                    "data": json.loads(Path(entry["path"]).read_text(encoding="utf-8"))}
        default_path = Path(plugins.find_plugin_dir(plugin_name) or "") / plugins.CONFIG_DEFAULT_FILE_NAME
        return {"ok": True, "loaded_path": str(default_path) if default_path.is_file() else "",
                "loaded_project_name": "", "loaded_agent_profile": "",
                "data": plugins.get_plugin_config(plugin_name, agent=None) or {}}

    @extension.extensible
    def _get_default_config(self, input: dict) -> dict | Response:
        plugin_name = input.get("plugin_name", "")
        if not plugin_name:
            return Response(status=400, response="Missing plugin_name")
        return {"ok": True, "data": plugins.get_default_plugin_config(plugin_name) or {}}

    @extension.extensible
    def _save_config(self, input: dict) -> dict | Response:
        plugin_name, settings = input.get("plugin_name", ""), input.get("settings", {})
        if not plugin_name:
            return Response(status=400, response="Missing plugin_name")
        if not isinstance(settings, dict):
            return Response(status=400, response="settings must be an object")
        plugins.save_plugin_config(plugin_name, input.get("project_name", ""), input.get("agent_profile", ""),
                                   settings)
        return {"ok": True}
