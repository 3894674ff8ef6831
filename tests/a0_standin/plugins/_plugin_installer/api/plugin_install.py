"""A0 `plugins/_plugin_installer/api/plugin_install.py` (v1.7), reduced to the Git actions.

What the user sees of a failed install is this reply's `error`: a `ValueError`'s text as it is, any
other exception as `Installation failed: <text>`.
"""

from __future__ import annotations

from typing import Any

from helpers.api import ApiHandler, Input, Request
from plugins._plugin_installer.helpers.install import install_from_git, update_from_git


class PluginInstall(ApiHandler):
    async def process(self, input: Input, request: Request) -> dict[str, Any]:
        action = input.get("action", "")
        try:
            if action == "install_git":
                return self._install_git(input)
            if action == "update_plugin":
                return update_from_git(input.get("plugin_name", ""))
            return {"success": False, "error": f"Unknown action: {action}"}
        except ValueError as e:
            return {"success": False, "error": str(e)}
        except Exception as e:
            return {"success": False, "error": f"Installation failed: {e}"}

    def _install_git(self, input: Input) -> dict[str, Any]:
        git_url = (input.get("git_url", "") or "").strip()
        if not git_url:
            return {"success": False, "error": "Git URL is required"}
        thumbnail_url = (input.get("thumbnail_url") or "").strip()
        return install_from_git(git_url, plugin_name=input.get("plugin_name", ""), thumbnail_url=thumbnail_url)
