"""What A0's plugin-settings modal loads of the plugin's settings (issue 23, item 3): complete, filled
on the server by the plugin's extension of A0's ``Plugins._get_config``, never by the panel writing
A0's private modal fields. Called through A0's own ``POST /api/plugins`` handler, as the modal calls it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from support.a0_layout import REPO_ROOT

from .conftest import A0

DEFAULTS = yaml.safe_load((REPO_ROOT / "default_config.yaml").read_text(encoding="utf-8"))


def get_config(a0: A0, plugin: str = "a0_reranker", **scope: str) -> dict[str, Any]:
    reply = a0.mod("helpers.api").dispatch_api("plugins", {"action": "get_config", "plugin_name": plugin, **scope})
    assert reply.status == 200, reply.body
    return reply.json()


def test_an_older_config_json_loads_with_every_key(a0: A0) -> None:
    a0.configure_global(endpoint="http://reranker.lan:8002", candidates=12, timeout=None)
    older = {"rerank_endpoint": "http://reranker.lan:8002", "rerank_candidates": 12, "rerank_timeout": None}
    loaded = get_config(a0)
    assert loaded["data"] == {**DEFAULTS, "rerank_endpoint": "http://reranker.lan:8002", "rerank_candidates": 12}
    assert list(loaded["data"]) == list(DEFAULTS)  # the defaults' order
    assert loaded["loaded_path"].endswith("config.json")  # the rest of A0's reply as it was
    saved = json.loads((a0.plugin_dir / "config.json").read_text(encoding="utf-8"))
    assert saved == older  # nothing written: the file changes when the user saves


def test_a_listed_endpoint_loads_as_the_text_the_field_holds(a0: A0) -> None:
    a0.configure_global(endpoint=["http://gpu-1.lan:8002", " http://gpu-2.lan:8002 "])
    assert get_config(a0)["data"]["rerank_endpoint"] == "http://gpu-1.lan:8002, http://gpu-2.lan:8002"


def test_values_the_plugin_takes_load_as_the_panel_shows_them(a0: A0) -> None:
    """A hand-edited config.json (or YAML's ``on``) holds values the plugin reads but the panel's select,
    toggles and checks did not: a blank API choice, "Must be on or off." on a working toggle. They load as
    the plugin reads them; a value it refuses stays, for the panel to name."""
    (a0.plugin_dir / "config.json").write_text(json.dumps({
        "rerank_api": " AUTO ", "rerank_enabled": "yes", "rerank_hedge": True, "rerank_timeout": "2.5",
        "rerank_candidates": "12", "rerank_max_retries": "often"}), encoding="utf-8")
    loaded = get_config(a0)["data"]
    assert {key: loaded[key] for key in ("rerank_api", "rerank_enabled", "rerank_hedge", "rerank_timeout",
                                         "rerank_candidates", "rerank_max_retries")} == {
        "rerank_api": "auto", "rerank_enabled": True, "rerank_hedge": "on", "rerank_timeout": 2.5,
        "rerank_candidates": 12, "rerank_max_retries": "often"}


def test_a_profiles_settings_are_completed_too(a0: A0) -> None:
    a0.configure(profile="agent0", enabled=False)
    loaded = get_config(a0, project_name="", agent_profile="agent0")
    assert loaded["loaded_agent_profile"] == "agent0"
    assert loaded["data"] == {**DEFAULTS, "rerank_enabled": False}


def test_other_plugins_settings_pass_untouched(a0: A0) -> None:
    other = a0.root / "usr" / "plugins" / "other_plugin"
    other.mkdir(parents=True)
    (other / "plugin.yaml").write_text('name: other_plugin\nversion: "1.0"\n', encoding="utf-8")
    (other / "config.json").write_text(json.dumps({"rerank_timeout": None, "x": [1, 2]}), encoding="utf-8")
    assert get_config(a0, plugin="other_plugin")["data"] == {"rerank_timeout": None, "x": [1, 2]}


EXTENSION = REPO_ROOT / "extensions/python/_functions/plugins/Plugins/_get_config/end/_10_a0_reranker_complete_settings.py"


def test_completing_the_modals_settings_needs_none_of_the_services_dependencies(tmp_path: Path) -> None:
    """A0 runs the completion for every plugin's modal: with aiohttp and async-lru missing (async-lru is
    not one of A0's), what the extension imports must still import and work (found in review: it had
    moved beside the panel's other handlers, which import the service)."""
    found = re.search(r"from usr\.plugins\.a0_reranker\.a0_hooks import (\w+)", EXTENSION.read_text(encoding="utf-8"))
    assert found is not None
    code = f"""
import sys
sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
from support.a0_layout import build_a0_root, install_on_sys_path
install_on_sys_path(build_a0_root({str(tmp_path)!r}))
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("aiohttp", "async_lru", "anyio"):
            raise ImportError(name)
sys.meta_path.insert(0, Missing())
import importlib
handler = importlib.import_module("usr.plugins.a0_reranker.a0_hooks.{found.group(1)}")
data = {{"result": {{"data": {{"rerank_endpoint": ["http://a:1", "http://b:2"]}}}},
        "kwargs": {{"input": {{"plugin_name": "a0_reranker"}}}}}}
handler.complete_loaded(data)
print(len(data["result"]["data"]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(DEFAULTS)
