"""Lifecycle (issue 4, acceptance 2): the seams install the wrapper, ``uninstall()`` restores the original,
recall keeps being reranked after A0 purges our modules (or replaces the Memory class), and
``install()`` makes the dependencies importable without touching a satisfied environment."""

from __future__ import annotations

import atexit
import gc
import inspect
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

from support.servers import RunningServer
from usr.plugins.a0_reranker.process.singletons import ANCHOR_MODULE

from .conftest import A0, memory_text

pytestmark = pytest.mark.anyio

METHOD = "search_similarity_threshold"


async def recalled(a0: A0, agent: Any, message: str) -> str:
    agent.hist_add_user_message(message)
    loop_data = await agent.run_message_loop()
    return str(loop_data.extras_persistent["memories"])


def is_reranked(memories: str) -> bool:
    """The prompt holds the reranker's best memory, not the embedding search's best."""
    return memory_text(15) in memories and memory_text(0) not in memories


def is_stock(memories: str) -> bool:
    return memory_text(0) in memories and memory_text(15) not in memories


async def test_startup_and_agent_init_seams_install_the_wrapper(a0: A0) -> None:
    original = a0.Memory.__dict__[METHOD]
    a0.mod("initialize").initialize_migration()  # startup_migration extensions
    assert a0.Memory.__dict__[METHOD].__wrapped__ is original
    a0.ours("a0_hooks.memory_patch").uninstall()
    a0.new_agent()  # agent_init extension
    assert a0.Memory.__dict__[METHOD].__wrapped__ is original


async def test_uninstall_hook_restores_the_original_and_stops_the_runtime(a0: A0, server: RunningServer) -> None:
    original = a0.Memory.__dict__[METHOD]
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    assert is_reranked(await recalled(a0, agent, "alpha beta"))
    assert a0.ours("service.runtime").running() is not None
    a0.plugins.call_plugin_hook("a0_reranker", "uninstall")  # as A0's uninstall_plugin() calls it
    assert a0.Memory.__dict__[METHOD] is original
    assert a0.ours("service.runtime").running() is None


async def test_uninstalling_the_plugin_leaves_stock_a0(a0: A0, server: RunningServer) -> None:
    original = a0.Memory.__dict__[METHOD]
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    a0.plugins.uninstall_plugin("a0_reranker")  # the hook, then the folder is deleted and modules purged
    assert not a0.plugin_dir.exists()
    assert a0.Memory.__dict__[METHOD] is original
    server.reset()
    fresh = a0.new_agent()  # no agent_init of ours any more
    memories = await recalled(a0, fresh, "alpha beta")
    assert a0.Memory.__dict__[METHOD] is original
    assert is_stock(memories) and server.count() == 0


async def test_pre_update_unwraps_and_next_use_rewraps(a0: A0, server: RunningServer) -> None:
    original = a0.Memory.__dict__[METHOD]
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    a0.plugins.call_plugin_hook("a0_reranker", "pre_update")
    assert a0.Memory.__dict__[METHOD] is original
    assert is_reranked(await recalled(a0, agent, "alpha beta"))  # _49 re-checked and wrapped again
    assert a0.Memory.__dict__[METHOD].__wrapped__ is original


async def test_a_failed_update_keeps_recall_reranked(a0: A0, server: RunningServer) -> None:
    """A0's update runs ``pre_update``, then ``git pull``; when the pull fails (offline, a conflict), neither the
    install hook nor the cache clearing after it runs. A0 still holds our extensions, loaded before the update,
    with the code ``pre_update`` retired: every recall ran stock until a restart, while the status said live."""
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    assert is_reranked(await recalled(a0, agent, "alpha beta"))  # A0 now holds our extensions
    a0.plugins.call_plugin_hook("a0_reranker", "pre_update")  # and the pull fails: nothing more runs
    assert is_reranked(await recalled(a0, agent, "alpha beta again"))
    assert is_reranked(await recalled(a0, a0.new_agent(), "alpha beta"))
    status = a0.ours("a0_hooks.status").snapshot(agent)
    assert (status["mode"], status["memory_wrapper_installed"]) == ("live", True)


UPDATES = 3


async def test_updates_in_place_leave_no_old_runtime_alive(a0: A0, server: RunningServer) -> None:
    """Each update in place stops the old runtime and the new code starts its own. Every runtime ever started
    was once kept until exit (an exit hook apiece, holding its owner loop, service, detection cache and
    counters): a long-lived A0 updated often kept them all. The old ones must be collectable, with one exit hook
    for the process, not one more per update."""
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    anchor = sys.modules[ANCHOR_MODULE]
    started: list[weakref.ref[Any]] = []
    hooks = atexit._ncallbacks()
    for _ in range(UPDATES):
        assert is_reranked(await recalled(a0, a0.new_agent(), "alpha beta"))
        started.append(weakref.ref(anchor.values["runtime"]))
        a0.plugins.call_plugin_hook("a0_reranker", "pre_update")  # A0's update_from_git, less the git pull
        a0.plugins.after_plugin_change(["a0_reranker"])
    assert is_reranked(await recalled(a0, a0.new_agent(), "alpha beta"))  # the current code's runtime
    current = anchor.values["runtime"]
    gc.collect()
    assert [ref() is None for ref in started] == [True] * UPDATES, "a retired runtime is still referenced"
    assert current.owner.alive
    assert atexit._ncallbacks() - hooks <= 1, "an exit hook per runtime started"


async def test_recall_is_still_reranked_after_a_purge_of_our_modules(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    assert is_reranked(await recalled(a0, agent, "alpha beta"))
    before = a0.Memory.__dict__[METHOD]
    old_entry = a0.ours("a0_hooks.recall_entry")
    purged = a0.plugins.purge_plugin_modules()  # what A0 does on plugin install/delete or extension edits
    assert "usr.plugins.a0_reranker.a0_hooks.recall_entry" in purged
    assert is_reranked(await recalled(a0, agent, "alpha beta again"))
    new_entry = a0.ours("a0_hooks.recall_entry")
    assert new_entry is not old_entry
    after = a0.Memory.__dict__[METHOD]
    assert new_entry.is_current(after) and after.__wrapped__ is before.__wrapped__
    assert len(a0.recall_lines(agent)) == 2


async def test_recall_is_still_reranked_after_the_memory_class_is_replaced(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, 16)
    old_class = a0.Memory
    a0.plugins.after_plugin_change(["_memory"], python_change=True)  # purges plugins.*: a new Memory class
    assert a0.Memory is not old_class and not hasattr(a0.Memory.__dict__[METHOD], "__wrapped__")
    fresh = a0.new_agent()
    await a0.seed(fresh, 16)  # the new class starts with an empty index
    assert is_reranked(await recalled(a0, fresh, "alpha beta"))
    assert a0.ours("a0_hooks.memory_patch").is_installed()


async def test_hooks_are_plain_sync_functions(a0: A0) -> None:
    hooks = a0.mod("helpers.modules").import_module(str(a0.plugin_dir / "hooks.py"))
    for name in ("install", "uninstall", "pre_update"):
        assert callable(getattr(hooks, name)) and not inspect.iscoroutinefunction(getattr(hooks, name))


async def test_install_hook_in_a_satisfied_environment_installs_nothing(a0: A0) -> None:
    lifecycle = a0.ours("a0_hooks.lifecycle")
    assert lifecycle.missing_requirements(lifecycle.REQUIREMENTS_FILE) == []
    assert a0.plugins.call_plugin_hook("a0_reranker", "install", default="no hook") is None

    def must_not_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pip must not run when everything is importable")

    lifecycle.install(run=must_not_run)


def test_missing_requirements_are_found_and_pip_installs_only_them_one_by_one(tmp_path: Path) -> None:
    from usr.plugins.a0_reranker.a0_hooks import lifecycle

    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# comment\nanyio>=4.0\nanyio>=999.0\nzz-a0r-not-installed>=1.0  # why\n\npyyaml\n")
    missing = lifecycle.missing_requirements(requirements)
    assert missing == ["anyio>=999.0", "zz-a0r-not-installed>=1.0"]
    commands: list[list[str]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, "ok", "")

    lifecycle.pip_install(missing, run=run)
    assert commands == [[sys.executable, "-m", "pip", "install", requirement] for requirement in missing]


def test_every_requirement_pip_could_not_install_is_named_in_one_message() -> None:
    from usr.plugins.a0_reranker.a0_hooks import lifecycle

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if command[-1].startswith("anyio"):
            return subprocess.CompletedProcess(command, 0, "ok", "")
        if command[-1].startswith("slow"):
            raise subprocess.TimeoutExpired(command, lifecycle.PIP_TIMEOUT_S)
        return subprocess.CompletedProcess(command, 1, "", "ERROR: Could not find a version\nERROR: No matching "
                                                         "distribution found for zz>=1\n")

    with pytest.raises(lifecycle.DependencyInstallError) as failed:
        lifecycle.pip_install(["anyio>=4", "zz>=1", "slow-pkg"], run=run)
    assert str(failed.value) == (
        "a0_reranker could not install its dependencies zz>=1 (exit 1: ERROR: No matching distribution found for "
        f"zz>=1), slow-pkg (pip did not finish within {lifecycle.PIP_TIMEOUT_S} s). Install them in Agent Zero's "
        f"Python, then install the plugin again: {sys.executable} -m pip install 'zz>=1' slow-pkg")
