"""Install and update through A0's own installer (the stand-in of ``plugins/_plugin_installer``), from a git
upstream made of this working tree (issue 14, acceptances 1 and 2).

- The Hub's install clones the plugin, downloads the index thumbnail into ``webui/thumbnail.png`` and
  runs ``install()``; the clone stays clean for git and a later update (``git pull``) goes through.
- An update in place (``pre_update``, ``git pull``, ``install``) runs the new code at once: the old
  owner loop is stopped, the memory search unwrapped, the plugin's modules dropped, and the new code
  wraps it again, with no restart of A0.
- When ``install()`` cannot install a dependency (here a real pip, offline, asked for a version that
  does not exist), A0 deletes the new folder and the user reads our one message: the requirement,
  pip's reason and the exact command to run in A0's Python.
"""

from __future__ import annotations

import functools
import http.server
import importlib
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.standin import use_root

from support.a0_layout import PLUGIN_NAME, REPO_ROOT, build_a0_root, commit_all, plugin_repository
from support.ports import listen_on_fresh_port
from support.servers import start_server

from .conftest import memory_text, prio_scorer

UNSATISFIABLE = "async-lru>=999.0"  # the dependency A0 lacks, at a version no index has
THUMBNAIL = REPO_ROOT / "docs" / "hub" / "thumbnail.png"


@pytest.fixture
def a0_root(tmp_path: Path) -> Iterator[Path]:
    """A0 without the plugin: the installer is what puts it into ``usr/plugins``."""
    root = build_a0_root(tmp_path / "a0")
    (root / "usr" / "plugins" / PLUGIN_NAME).unlink()
    with use_root(root):
        yield root


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    return plugin_repository(tmp_path / "upstream")


@pytest.fixture
def hub_thumbnail_url() -> Iterator[str]:
    """The index's thumbnail, served on 127.0.0.1 as the Hub's CDN would serve it."""
    handler = functools.partial(_QuietHandler, directory=str(THUMBNAIL.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
    listen_on_fresh_port(server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{THUMBNAIL.name}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def installer(action: str, **fields: Any) -> dict[str, Any]:
    """``POST /api/plugins/_plugin_installer/plugin_install``, as the Plugins UI sends it."""
    api = importlib.import_module("helpers.api")
    result = api.dispatch_plugin_api("_plugin_installer", "plugin_install", {"action": action, **fields})
    assert result.status == 200, result.body
    reply: dict[str, Any] = result.json()
    return reply


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30,
                          check=True).stdout


def test_a_hub_install_gets_the_thumbnail_and_a_later_update_still_pulls(
        a0_root: Path, upstream: Path, hub_thumbnail_url: str) -> None:
    installed = installer("install_git", git_url=str(upstream), plugin_name=PLUGIN_NAME,
                          thumbnail_url=hub_thumbnail_url)
    assert installed["success"], installed
    plugin = a0_root / "usr" / "plugins" / PLUGIN_NAME
    assert (plugin / "webui" / "thumbnail.png").read_bytes() == THUMBNAIL.read_bytes()
    assert git(plugin, "status", "--porcelain") == ""  # the download is ignored, not a local change

    (upstream / "README.md").write_text("# next release\n", encoding="utf-8")
    commit_all(upstream, "next release")
    updated = installer("update_plugin", plugin_name=PLUGIN_NAME)
    assert updated["success"], updated
    assert updated["current_commit"] == git(upstream, "rev-parse", "HEAD").strip()
    assert (plugin / "webui" / "thumbnail.png").is_file()


NEXT_RELEASE_LINE = "Reranked by the next release"


async def reranked_recall_lines(agent: Any) -> list[str]:
    """One recall of ``agent``: the plugin's log lines of it."""
    agent.context.log.reset()
    agent.hist_add_user_message("alpha beta")
    await agent.run_message_loop()
    return [item.heading for item in agent.context.log.logs if "Rerank" in item.heading]


def new_agent() -> Any:
    agent_module = importlib.import_module("agent")
    return agent_module.AgentContext(agent_module.AgentConfig(profile="agent0")).agent0


def plugin_module(name: str) -> Any:
    return importlib.import_module(f"usr.plugins.{PLUGIN_NAME}.{name}")


@pytest.mark.anyio
async def test_an_update_in_place_runs_the_new_code_without_a_restart(a0_root: Path, upstream: Path) -> None:
    assert installer("install_git", git_url=str(upstream), plugin_name=PLUGIN_NAME)["success"]
    server = await start_server("infinity", scorer=prio_scorer)
    try:
        plugins = importlib.import_module("helpers.plugins")
        plugins.save_plugin_config(PLUGIN_NAME, "", "", {"rerank_endpoint": server.url, "rerank_timeout": 10})
        agent = new_agent()
        memory = await importlib.import_module("plugins._memory.helpers.memory").Memory.get(agent)
        for k in range(12):
            await memory.insert_text(memory_text(k), {"area": "main"})
        [before] = await reranked_recall_lines(agent)
        assert before.startswith("Reranked recall:")
        old_runtime = plugin_module("service.runtime").running()
        assert old_runtime is not None

        release_file = upstream / "a0_hooks" / "recall_search.py"  # release N+1: the same line, reworded
        release_file.write_text(release_file.read_text(encoding="utf-8").replace(
            'f"Reranked {source}:', f'f"{NEXT_RELEASE_LINE} {{source}}:'), encoding="utf-8")
        commit_all(upstream, "next release")
        assert installer("update_plugin", plugin_name=PLUGIN_NAME)["success"]

        assert not old_runtime.owner.alive  # the old owner loop and its HTTP session are gone
        [after] = await reranked_recall_lines(agent)
        assert after.startswith(f"{NEXT_RELEASE_LINE} recall:"), after
        [fresh] = await reranked_recall_lines(new_agent())
        assert fresh.startswith(f"{NEXT_RELEASE_LINE} recall:"), fresh
    finally:
        plugin_module("service.runtime").shutdown()
        await server.close()


def test_without_the_ignore_rule_an_update_that_brings_a_thumbnail_stops(
        a0_root: Path, upstream: Path, hub_thumbnail_url: str) -> None:
    """The hazard the rule prevents, shown on an upstream without it (and so: the rule is needed)."""
    gitignore = upstream / ".gitignore"
    gitignore.write_text(gitignore.read_text().replace("webui/thumbnail.*\n", ""), encoding="utf-8")
    commit_all(upstream, "no thumbnail rule")
    assert installer("install_git", git_url=str(upstream), thumbnail_url=hub_thumbnail_url)["success"]
    (upstream / "webui" / "thumbnail.png").write_bytes(b"a tracked thumbnail")
    commit_all(upstream, "track a thumbnail")
    updated = installer("update_plugin", plugin_name=PLUGIN_NAME)
    assert not updated["success"] and "would be overwritten" in updated["error"], updated


def test_a_dependency_pip_cannot_install_deletes_the_folder_and_says_what_to_run(
        a0_root: Path, upstream: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    requirements = upstream / "requirements.txt"
    requirements.write_text(requirements.read_text().replace("async-lru>=2.3", UNSATISFIABLE), encoding="utf-8")
    commit_all(upstream, "needs a release that does not exist")
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # a real pip, offline: it fails at once, installs nothing

    reply = installer("install_git", git_url=str(upstream), plugin_name=PLUGIN_NAME)

    command = shlex.join([sys.executable, "-m", "pip", "install", UNSATISFIABLE])
    assert reply == {"success": False, "error": (
        f"Installation failed: a0_reranker could not install its dependency {UNSATISFIABLE} (exit 1: ERROR: No "
        f"matching distribution found for {UNSATISFIABLE}). Install it in Agent Zero's Python, then install the "
        f"plugin again: {command}")}
    assert not (a0_root / "usr" / "plugins" / PLUGIN_NAME).exists()  # A0 deleted the new folder
    rerun = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=120, check=False)
    assert rerun.returncode == 1 and f"No matching distribution found for {UNSATISFIABLE}" in rerun.stderr


def test_a_1x_install_cannot_update_to_a_new_history_so_users_reinstall(
        a0_root: Path, upstream: Path, tmp_path: Path) -> None:
    """Why the README says "remove the old plugin and install afresh": same URL, a history not shared."""
    assert installer("install_git", git_url=str(upstream))["success"]
    plugin = a0_root / "usr" / "plugins" / PLUGIN_NAME
    before = git(plugin, "rev-parse", "HEAD")
    subprocess.run(["rm", "-rf", str(upstream / ".git")], check=True)
    commit_all(upstream, "the new history", init=True)
    updated = installer("update_plugin", plugin_name=PLUGIN_NAME)
    assert not updated["success"] and "git pull failed" in updated["error"], updated
    assert git(plugin, "rev-parse", "HEAD") == before
