"""A0 `plugins/_plugin_installer/helpers/install.py` (v1.7), reduced to installs and updates from Git.

`install_from_git` clones into a temporary folder, checks `plugin.yaml` (its `name` must match the
expected one), moves the clone to `usr/plugins/<name>`, downloads the Hub's thumbnail into
`webui/thumbnail.<ext>` (`png` when the URL has no allowed extension; a failed download is only a
warning), then runs the `install` hook: when the hook raises, the new folder is deleted and the error
raised again. `update_from_git` runs `pre_update`, pulls the tracked branch (`git pull`), then runs
`install` again (a raising hook leaves the folder in place). Stand-in difference: A0 uses GitPython,
this runs the git command line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from helpers.plugins import META_FILE_NAME, PluginMetadata, after_plugin_change
from helpers.print_style import PrintStyle

from helpers import files, plugins
from helpers import yaml as yaml_helper

THUMBNAIL_EXTENSIONS = ("png", "jpg", "jpeg", "gif", "webp")


def _user_plugins_dir() -> str:
    return files.get_abs_path(files.USER_DIR, files.PLUGINS_DIR)


def _git(*args: str, cwd: str | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def validate_plugin_dir(path: str, plugin_name: str = "") -> PluginMetadata:
    meta_path = os.path.join(path, META_FILE_NAME)
    if not os.path.isfile(meta_path):
        raise ValueError(f"No {META_FILE_NAME} found in {os.path.basename(path)}")
    model = PluginMetadata.model_validate(yaml_helper.loads(Path(meta_path).read_text(encoding="utf-8")))
    if plugin_name and plugin_name != model.name:
        raise ValueError(f"Plugin name is incorrect: expected '{plugin_name}', got '{model.name}'.")
    if not model.name.strip():
        raise ValueError(f"{META_FILE_NAME} is missing required field 'name'")
    return model


def check_plugin_conflict(name: str) -> None:
    if os.path.exists(os.path.join(_user_plugins_dir(), name)):
        raise ValueError(f"Plugin '{name}' is already installed")


def _download_thumbnail(thumbnail_url: str, plugin_dir: str) -> None:
    """The Hub's thumbnail into `<plugin_dir>/webui/thumbnail.<ext>`. Never raises."""
    try:
        parsed = urlparse(thumbnail_url)
        if not thumbnail_url or parsed.scheme not in ("http", "https"):
            return
        ext = parsed.path.lower().rsplit(".", 1)[-1] if "." in parsed.path else ""
        ext = ext if ext in THUMBNAIL_EXTENSIONS else "png"
        webui = Path(plugin_dir) / "webui"
        webui.mkdir(parents=True, exist_ok=True)
        request = urllib.request.Request(thumbnail_url, headers={"User-Agent": "AgentZero"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            (webui / f"thumbnail.{ext}").write_bytes(answer.read())
    except Exception as e:
        PrintStyle.warning(f"Failed to download plugin thumbnail: {e}")


def install_from_git(url: str, token: str | None = None, plugin_name: str = "", thumbnail_url: str = "") -> dict[str, Any]:
    temp_name = f"tmp_plugin_{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:8]}"
    git_dir = files.get_abs_path(files.TEMP_DIR, "plugins_installer", temp_name)
    try:
        os.makedirs(os.path.dirname(git_dir), exist_ok=True)
        _git("clone", url, git_dir)
        meta = validate_plugin_dir(git_dir, plugin_name=plugin_name)
        check_plugin_conflict(meta.name)
        final_dir = os.path.join(_user_plugins_dir(), meta.name)
        os.makedirs(_user_plugins_dir(), exist_ok=True)
        shutil.move(git_dir, final_dir)
    except Exception as e:
        PrintStyle.error(f"Failed to validate plugin: {e}")
        files.delete_dir(git_dir)
        raise
    _download_thumbnail(thumbnail_url, final_dir)
    try:
        run_install_hook(meta.name)
    except Exception as e:
        PrintStyle.error(f"Failed to run installation hook for {meta.name}: {e}")
        files.delete_dir(final_dir)
        raise
    python_change = bool(files.find_existing_paths_by_pattern(final_dir + "/**/*.py"))
    after_plugin_change([meta.name], python_change=python_change)
    return {"success": True, "plugin_name": meta.name, "title": meta.title or meta.name,
            "path": files.deabsolute_path(final_dir)}


def update_from_git(plugin_name: str) -> dict[str, Any]:
    plugin_name = (plugin_name or "").strip()
    if not plugin_name:
        raise ValueError("Missing plugin_name")
    plugin_dir = plugins.find_plugin_dir(plugin_name)
    if not plugin_dir:
        raise ValueError("Plugin not found")
    if not files.is_in_dir(plugin_dir, _user_plugins_dir()):
        raise ValueError("Only custom plugins can be updated")
    run_pre_update_hook(plugin_name)
    branch = _git("rev-parse", "--abbrev-ref", "HEAD", cwd=plugin_dir).strip()
    remote = _git("config", f"branch.{branch}.remote", cwd=plugin_dir).strip()
    _git("pull", remote, branch, cwd=plugin_dir)
    run_install_hook(plugin_name)
    after_plugin_change([plugin_name])
    head = _git("rev-parse", "HEAD", cwd=plugin_dir).strip()
    return {"ok": True, "success": True, "plugin_name": plugin_name, "current_commit": head,
            "path": files.deabsolute_path(plugin_dir)}


def run_install_hook(plugin_name: str) -> Any:
    return plugins.call_plugin_hook(plugin_name, "install")


def run_pre_update_hook(plugin_name: str) -> Any:
    return plugins.call_plugin_hook(plugin_name, "pre_update")
