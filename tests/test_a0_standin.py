"""The A0 v1.7 stand-in (tests/a0_standin) reproduces the A0 behaviour the plugin depends on.

Every test runs against a fresh A0 root (`build_a0_root(tmp_path)` + `use_root`) WITHOUT the
plugin under test linked in, so it checks stock A0 behaviour only.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers.standin import use_root

from support.a0_layout import PLUGIN_NAME, build_a0_root

# --- fixtures and helpers ------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class A0:
    """One A0 root made importable; module properties re-import (so they follow a purge)."""

    root: Path

    def write(self, rel: str, text: str = "") -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def plugin(self, name: str, files: dict[str, str] | None = None, *, builtin: bool = False, meta: str = "") -> Path:
        base = self.root / ("plugins" if builtin else "usr/plugins") / name
        self.write(str(base / "plugin.yaml"), meta or f"name: {name}\nversion: '1.0.0'\n")
        for rel, text in (files or {}).items():
            self.write(str(base / rel), text)
        return base

    def mod(self, name: str) -> ModuleType:
        return importlib.import_module(name)

    @property
    def plugins(self) -> Any:
        return self.mod("helpers.plugins")

    @property
    def extension(self) -> Any:
        return self.mod("helpers.extension")

    @property
    def agent(self) -> Any:
        return self.mod("agent")

    @property
    def memory(self) -> Any:
        return self.mod("plugins._memory.helpers.memory")

    @property
    def Memory(self) -> Any:
        return self.memory.Memory

    def new_agent(self, profile: str = "", project: str | None = None) -> Any:
        ag = self.agent
        data = {"project": project} if project else None
        return ag.AgentContext(ag.AgentConfig(profile=profile), data=data).agent0

    def save_memory_config(self, **changes: Any) -> None:
        """A full `_memory` config.json (A0 never merges it with the defaults)."""
        defaults = self.plugins.get_default_plugin_config("_memory")
        self.plugins.save_plugin_config("_memory", "", "", {**defaults, **changes})


@pytest.fixture
def a0(tmp_path: Path) -> Iterator[A0]:
    root = build_a0_root(tmp_path / "a0")
    (root / "usr" / "plugins" / PLUGIN_NAME).unlink()  # stock A0 only
    with use_root(root):
        yield A0(root)


def record_searches(a0: A0) -> list[dict[str, Any]]:
    """Wrap `Memory.search_similarity_threshold` to record each call's shape and thread."""
    calls: list[dict[str, Any]] = []
    original = a0.Memory.search_similarity_threshold

    async def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append({"args": args, "kwargs": kwargs, "thread": threading.current_thread().name})
        return await original(self, *args, **kwargs)

    a0.Memory.search_similarity_threshold = recording
    return calls


SCOPE_PLUGIN = {
    "helpers/scope.py": """
        import contextvars
        RECALL = contextvars.ContextVar("zz_recall", default=None)
        """,
    "extensions/python/message_loop_prompts_after/_49_zz_scope.py": """
        from helpers.extension import Extension
        from usr.plugins.zzprobe.helpers.scope import RECALL

        class ZzScopeSet(Extension):
            async def execute(self, loop_data=None, **kwargs):
                self.agent.set_data("_zz_token", RECALL.set(self.agent.number))
        """,
}
SCOPE_RESET = {
    "extensions/python/message_loop_prompts_after/_51_zz_scope.py": """
        from helpers.extension import Extension
        from usr.plugins.zzprobe.helpers.scope import RECALL

        class ZzScopeReset(Extension):
            async def execute(self, loop_data=None, **kwargs):
                RECALL.reset(self.agent.get_data("_zz_token"))
        """,
}


# --- layout --------------------------------------------------------------------------------------


def test_session_root_links_the_plugin_and_finds_itself_from_its_files() -> None:
    import importlib.util

    from helpers import files

    root = Path(files.get_base_dir())
    assert (root / "helpers" / "files.py").is_file()
    assert Path(os.getcwd()) != root
    spec = importlib.util.find_spec(f"usr.plugins.{PLUGIN_NAME}")
    assert spec is not None and spec.submodule_search_locations is not None
    assert str(root / "usr" / "plugins" / PLUGIN_NAME) in list(spec.submodule_search_locations)


def test_use_root_switches_and_restores_modules(tmp_path: Path) -> None:
    from helpers import files as session_files

    other = build_a0_root(tmp_path / "other")
    with use_root(other):
        inner = importlib.import_module("helpers.files")
        assert inner is not session_files
        assert inner.get_base_dir() == str(other)
    assert importlib.import_module("helpers.files") is session_files


# --- discovery and config ---------------------------------------------------------------


def test_plugin_roots_discovery_and_user_wins(a0: A0) -> None:
    a0.plugin("dup", builtin=True)
    a0.plugin("dup")
    a0.plugin("zeta")
    a0.write("usr/plugins/not_a_plugin/readme.txt", "no plugin.yaml")
    p = a0.plugins
    assert p.get_plugin_roots("x") == [str(a0.root / "usr/plugins/x"), str(a0.root / "plugins/x")]
    assert p.get_plugins_list() == ["_memory", "_plugin_installer", "dup", "zeta"]
    assert p.find_plugin_dir("dup") == str(a0.root / "usr/plugins/dup")
    assert p.find_plugin_dir("_memory") == str(a0.root / "plugins/_memory")
    assert p.find_plugin_dir("not_a_plugin") is None


def test_plugin_yaml_version_must_be_a_string(a0: A0) -> None:
    a0.plugin("floaty", meta="name: floaty\nversion: 1.0\nauthor: me\n")
    with pytest.raises(ValueError, match="version"):
        a0.plugins.get_plugin_meta("floaty")
    a0.plugin("fine", meta="name: fine\nversion: '1.0'\nlicense: MIT\n")
    assert a0.plugins.get_plugin_meta("fine").version == "1.0"


CFG_LEVELS = {
    "L1_project_profile": "usr/projects/proj/.a0proj/agents/dev/plugins/cfgp/config.json",
    "L2_project": "usr/projects/proj/.a0proj/plugins/cfgp/config.json",
    "L3a_usr_agents": "usr/agents/dev/plugins/cfgp/config.json",
    "L3b_plugin_agents": "usr/plugins/other/agents/dev/plugins/cfgp/config.json",
    "L3c_agents": "agents/dev/plugins/cfgp/config.json",
    "L4_usr_plugins": "usr/plugins/cfgp/config.json",
    "L5_plugins": "plugins/cfgp/config.json",
}


def test_config_lookup_order_with_project_and_profile(a0: A0) -> None:
    a0.plugin("cfgp", {"default_config.yaml": "a: 1\nb: 2\n"})
    a0.plugin("other")
    for level, rel in CFG_LEVELS.items():
        a0.write(rel, json.dumps({"level": level}))
    agent = a0.new_agent(profile="dev", project="proj")
    # v1.7 quirk: with a profile, the project-level file (L2) is never consulted.
    expected = [
        "L1_project_profile",
        "L3a_usr_agents",
        "L3b_plugin_agents",
        "L3c_agents",
        "L4_usr_plugins",
        "L5_plugins",
    ]
    for level in expected:
        assert a0.plugins.get_plugin_config("cfgp", agent) == {"level": level}
        (a0.root / CFG_LEVELS[level]).unlink()
    assert (a0.root / CFG_LEVELS["L2_project"]).exists()
    assert a0.plugins.get_plugin_config("cfgp", agent) == {"a": 1, "b": 2}


def test_config_project_level_applies_without_profile(a0: A0) -> None:
    a0.plugin("cfgp", {"default_config.yaml": "a: 1\n"})
    a0.write(CFG_LEVELS["L2_project"], json.dumps({"level": "L2"}))
    a0.write(CFG_LEVELS["L4_usr_plugins"], json.dumps({"level": "L4"}))
    assert a0.plugins.get_plugin_config("cfgp", a0.new_agent(project="proj")) == {"level": "L2"}
    assert a0.plugins.get_plugin_config("cfgp", project_name="proj", agent_profile="") == {"level": "L2"}
    assert a0.plugins.get_plugin_config("cfgp", a0.new_agent()) == {"level": "L4"}
    assert a0.plugins.get_plugin_config("missing") is None


def test_config_json_replaces_defaults_without_merging(a0: A0) -> None:
    a0.plugin("cfgp", {"default_config.yaml": "a: 1\nb: 2\nnested:\n  x: 1\n"})
    a0.plugins.save_plugin_config("cfgp", "", "", {"a": 5})
    assert a0.plugins.get_plugin_config("cfgp") == {"a": 5}
    assert a0.plugins.get_default_plugin_config("cfgp") == {"a": 1, "b": 2, "nested": {"x": 1}}


def test_env_override_applies_only_to_defaults(a0: A0, monkeypatch: pytest.MonkeyPatch) -> None:
    a0.plugin("cfgp", {"default_config.yaml": "a: 1\nflag: false\nname: x\nnested:\n  deep: s\n"})
    monkeypatch.setenv("A0_SET_cfgp__a", "7")
    monkeypatch.setenv("A0_SET_cfgp__flag", "yes")
    monkeypatch.setenv("A0_SET_CFGP__NESTED__DEEP", " up ")
    assert a0.plugins.get_plugin_config("cfgp") == {"a": 7, "flag": True, "name": "x", "nested": {"deep": "up"}}
    assert a0.plugins.get_default_plugin_config("cfgp")["a"] == 1
    a0.plugins.save_plugin_config("cfgp", "", "", {"a": 3})
    assert a0.plugins.get_plugin_config("cfgp") == {"a": 3}


def test_save_plugin_config_target_paths(a0: A0) -> None:
    a0.plugin("cfgp")
    for project, profile, rel in [
        ("", "", "usr/plugins/cfgp/config.json"),
        ("proj", "", "usr/projects/proj/.a0proj/plugins/cfgp/config.json"),
        ("", "dev", "usr/agents/dev/plugins/cfgp/config.json"),
        ("proj", "dev", "usr/projects/proj/.a0proj/agents/dev/plugins/cfgp/config.json"),
    ]:
        a0.plugins.save_plugin_config("cfgp", project, profile, {"scope": rel})
        assert json.loads((a0.root / rel).read_text()) == {"scope": rel}


HOOKS = """
    from helpers import files

    def get_plugin_config(default=None, agent=None):
        return {**(default or {}), "hooked": agent is not None}

    def save_plugin_config(default=None, settings=None, **kwargs):
        if settings.get("skip"):
            return None
        return {k: v for k, v in settings.items() if k != "secret"}

    async def get_default_plugin_config(file_path=None):
        return {"from_async_hook": file_path.endswith("default_config.yaml")}

    def uninstall():
        files.write_file(files.get_abs_path("tmp", "uninstalled"), "yes")
    """


def test_hooks_transform_config_and_are_not_in_sys_modules(a0: A0) -> None:
    base = a0.plugin("hookp", {"default_config.yaml": "a: 1\n", "hooks.py": HOOKS})
    p = a0.plugins
    assert p.get_plugin_config("hookp") == {"a": 1, "hooked": False}
    assert p.get_plugin_config("hookp", a0.new_agent()) == {"a": 1, "hooked": True}
    assert "hooks" not in sys.modules
    assert p.get_default_plugin_config("hookp") == {"from_async_hook": True}  # asyncio.run, no loop here
    p.save_plugin_config("hookp", "", "", {"a": 2, "secret": "s"})
    assert json.loads((base / "config.json").read_text()) == {"a": 2}
    (base / "config.json").unlink()
    p.save_plugin_config("hookp", "", "", {"skip": True})
    assert not (base / "config.json").exists()
    assert p.call_plugin_hook("hookp", "no_such_hook", default="dflt") == "dflt"
    assert p.call_plugin_hook("nowhere", "install", default=1) == 1


# --- toggles ----------------------------------------------------------------------------------


def test_toggles_flip_per_scope(a0: A0) -> None:
    a0.plugin("tgl", meta="name: tgl\nversion: '1'\nper_project_config: true\nper_agent_config: true\n")
    p = a0.plugins
    plain, in_project, dev = a0.new_agent(), a0.new_agent(project="proj"), a0.new_agent(profile="dev")
    assert "tgl" in p.get_enabled_plugins(None)
    p.toggle_plugin("tgl", False)
    assert (a0.root / "usr/plugins/tgl/.toggle-0").exists()
    assert "tgl" not in p.get_enabled_plugins(None)
    assert "tgl" not in p.get_enabled_plugins(plain)
    p.toggle_plugin("tgl", True, project_name="proj")
    assert (a0.root / "usr/projects/proj/.a0proj/plugins/tgl/.toggle-1").exists()
    assert "tgl" in p.get_enabled_plugins(in_project)
    assert "tgl" not in p.get_enabled_plugins(plain)
    assert p.get_toggle_state("tgl") == "advanced"
    p.toggle_plugin("tgl", True)
    p.toggle_plugin("tgl", False, agent_profile="dev")
    assert "tgl" not in p.get_enabled_plugins(dev)
    assert "tgl" in p.get_enabled_plugins(plain)
    p.toggle_plugin("tgl", True, clear_overrides=True)
    assert "tgl" in p.get_enabled_plugins(dev)
    assert p.get_toggle_state("tgl") == "enabled"


def test_enabled_list_is_cached_until_plugin_change(a0: A0) -> None:
    a0.plugin("tgl")
    p = a0.plugins
    assert "tgl" in p.get_enabled_plugins(None)
    a0.write("usr/plugins/tgl/.toggle-0")
    assert "tgl" in p.get_enabled_plugins(None)  # stale cache, as in A0
    p.after_plugin_change(["tgl"])
    assert "tgl" not in p.get_enabled_plugins(None)


# --- extensions --------------------------------------------------------------------------


def ext(tag: str, base: str = "Extension", imports: str = "") -> str:
    return f"""
        from helpers.extension import Extension
        {imports}

        class Recorder({base}):
            def execute(self, calls=None, **kwargs):
                calls.append("{tag}")
        """


def test_extension_priority_dedupe_and_order(a0: A0) -> None:
    point = "extensions/python/probe_point"
    a0.plugin("aaa", {f"{point}/_10_a.py": ext("aaa/_10_a"), f"{point}/_20_same.py": ext("aaa/_20_same")})
    a0.plugin("bbb", {f"{point}/_20_same.py": ext("bbb/_20_same"), f"{point}/_05_b.py": ext("bbb/_05_b")})
    a0.write(f"usr/{point}/_10_a.py", ext("usr/_10_a"))
    a0.write(f"usr/{point}/_30_user.py", ext("usr/_30_user"))
    a0.write(f"{point}/_99_core.py", ext("core/_99_core"))
    a0.write(f"usr/agents/dev/{point}/_30_user.py", ext("profile/_30_user"))

    calls: list[str] = []
    asyncio.run(a0.extension.call_extensions_async("probe_point", None, calls=calls))
    assert calls == ["bbb/_05_b", "usr/_10_a", "aaa/_20_same", "usr/_30_user", "core/_99_core"]

    calls.clear()
    asyncio.run(a0.extension.call_extensions_async("probe_point", a0.new_agent(profile="dev"), calls=calls))
    assert calls == ["bbb/_05_b", "usr/_10_a", "aaa/_20_same", "profile/_30_user", "core/_99_core"]

    a0.plugins.toggle_plugin("bbb", False)
    calls.clear()
    a0.extension.call_extensions_sync("probe_point", None, calls=calls)
    assert calls == ["usr/_10_a", "aaa/_20_same", "usr/_30_user", "core/_99_core"]
    assert not any(name.endswith("_20_same") for name in sys.modules)


def test_one_extension_per_file_takes_last_name_imported_ones_included(a0: A0) -> None:
    point = "extensions/python/probe_point"
    a0.plugin(
        "aaa",
        {
            "helpers/base.py": ext("imported-base").replace("class Recorder", "class ZzzBase"),
            f"{point}/_10_two.py": ext("Alpha") + ext("Zed").replace("class Recorder", "class Zed"),
            f"{point}/_20_imported.py": ext(
                "Mine", base="ZzzBase", imports="from usr.plugins.aaa.helpers.base import ZzzBase"
            ),
        },
    )
    calls: list[str] = []
    a0.extension.call_extensions_sync("probe_point", None, calls=calls)
    assert calls == ["Zed", "imported-base"]


def test_extension_modules_rerun_after_cache_clear_and_sync_rejects_async(a0: A0) -> None:
    point = "extensions/python/probe_point"
    a0.plugin(
        "aaa",
        {
            "helpers/counter.py": "loads = 0\n",
            f"{point}/_10_count.py": """
            from helpers.extension import Extension
            from usr.plugins.aaa.helpers import counter
            counter.loads += 1

            class Count(Extension):
                async def execute(self, **kwargs):
                    return None
            """,
        },
    )
    counter = a0.mod("usr.plugins.aaa.helpers.counter")
    asyncio.run(a0.extension.call_extensions_async("probe_point", None))
    asyncio.run(a0.extension.call_extensions_async("probe_point", None))
    assert counter.loads == 1
    a0.plugins.after_plugin_change(["aaa"])
    asyncio.run(a0.extension.call_extensions_async("probe_point", None))
    assert counter.loads == 2
    assert "_10_count" not in sys.modules
    with pytest.raises(ValueError, match="returned awaitable in sync mode"):
        a0.extension.call_extensions_sync("probe_point", None)


EXTP = "extensions/python/_functions/usr/plugins/extp/helpers/target"


def handler(body: str, is_async: bool = False) -> str:
    prefix = "async " if is_async else ""
    return (
        "from helpers.extension import Extension\n"
        "from usr.plugins.extp.helpers import flags\n\n"
        "class Handler(Extension):\n"
        f"    {prefix}def execute(self, data=None, **kwargs):\n" + textwrap.indent(textwrap.dedent(body), " " * 8)
    )


def test_extensible_start_end_result_and_exception(a0: A0) -> None:
    a0.plugin(
        "extp",
        {
            "helpers/flags.py": "end_ran = []\n",
            "helpers/target.py": """
            from helpers.extension import extensible

            @extensible
            def compute(x, y=1):
                return x + y

            @extensible
            async def acompute(x, agent=None):
                return x * 2

            @extensible
            def explode():
                return "original"
            """,
            f"{EXTP}/compute/start/_10_s.py": handler('data["args"] = (data["args"][0] + 100,)\ndata["mark"] = "s"\n'),
            f"{EXTP}/compute/end/_10_e.py": handler('data["result"] = (data["result"], data["mark"])\n'),
            f"{EXTP}/acompute/end/_10_e.py": handler(
                'data["result"] = (data["result"], self.agent.number if self.agent else None)\n', is_async=True
            ),
            f"{EXTP}/explode/start/_10_s.py": handler('data["exception"] = ValueError("stop")\n'),
            f"{EXTP}/explode/end/_10_e.py": handler("flags.end_ran.append(True)\n"),
        },
    )
    target = a0.mod("usr.plugins.extp.helpers.target")
    assert target.compute(1, y=2) == (103, "s")
    assert asyncio.run(target.acompute(3, agent=a0.new_agent())) == (6, 0)
    assert asyncio.run(target.acompute(3)) == (6, None)
    with pytest.raises(ValueError, match="stop"):
        target.explode()
    assert a0.mod("usr.plugins.extp.helpers.flags").end_ran == []
    assert target.compute.__wrapped__(1) == 2


@pytest.mark.anyio
async def test_runtime_extensible_memory_search_uses_the_documented_path(a0: A0) -> None:
    a0.plugin(
        "seam",
        {
            "helpers/seen.py": "calls = []\n",
            "extensions/python/_functions/plugins/_memory/helpers/memory/Memory/search_similarity_threshold"
            "/end/_10_seam.py": """
            from helpers.extension import Extension
            from usr.plugins.seam.helpers import seen

            class Seam(Extension):
                def execute(self, data=None, **kwargs):
                    seen.calls.append((type(data["args"][0]).__name__, data["args"][1:], dict(data["kwargs"])))
                    data["result"] = list(reversed(data["result"]))
            """,
        },
    )
    Memory = a0.Memory
    original = Memory.search_similarity_threshold
    Memory.search_similarity_threshold = a0.extension.extensible(original)
    assert Memory.search_similarity_threshold.__wrapped__ is original
    db = await Memory.get(a0.new_agent())
    await db.insert_text("alpha beta", {"area": "main"})
    await db.insert_text("alpha beta gamma", {"area": "main"})
    found = await db.search_similarity_threshold(query="alpha beta", limit=5, threshold=0.7)
    assert [d.page_content for d in found] == ["alpha beta gamma", "alpha beta"]
    await db.delete_documents_by_query("alpha beta", 0.99)
    calls = a0.mod("usr.plugins.seam.helpers.seen").calls
    assert calls[0] == ("Memory", (), {"query": "alpha beta", "limit": 5, "threshold": 0.7})
    assert calls[1] == ("Memory", ("alpha beta",), {"limit": 100, "threshold": 0.99, "filter": ""})


def test_agent_init_runs_for_every_agent_and_startup_migration_seam(a0: A0) -> None:
    a0.plugin(
        "initp",
        {
            "helpers/seen.py": "agents = []\nmigrations = []\n",
            "extensions/python/agent_init/_10_seen.py": """
            from helpers.extension import Extension
            from usr.plugins.initp.helpers import seen

            class Seen(Extension):
                def execute(self, **kwargs):
                    seen.agents.append(self.agent.number)
            """,
            "extensions/python/startup_migration/_10_seen.py": """
            from helpers.extension import Extension
            from usr.plugins.initp.helpers import seen

            class Migrate(Extension):
                def execute(self, **kwargs):
                    seen.migrations.append(self.agent)
            """,
        },
    )
    first = a0.new_agent()
    a0.agent.Agent(1, first.config, first.context)
    seen = a0.mod("usr.plugins.initp.helpers.seen")
    assert seen.agents == [0, 1]
    a0.mod("initialize").initialize_migration()
    assert seen.migrations == [None]


# --- purge and uninstall -----------------------------------------------------------


def test_purge_removes_usr_plugins_modules_and_plugins_purge_replaces_memory(a0: A0) -> None:
    a0.plugin("zzprobe", SCOPE_PLUGIN)
    scope = a0.mod("usr.plugins.zzprobe.helpers.scope")
    memory_class = a0.Memory
    memory_class.index["marker"] = object()
    purged = a0.plugins.purge_plugin_modules()
    assert "usr.plugins.zzprobe.helpers.scope" in purged
    assert not any(name.startswith("usr.plugins.") for name in sys.modules)
    assert a0.mod("usr.plugins.zzprobe.helpers.scope") is not scope
    assert a0.Memory is memory_class
    a0.plugins.after_plugin_change(["_memory"], python_change=True)
    assert a0.Memory is not memory_class
    assert a0.Memory.index == {}


def test_uninstall_runs_hook_deletes_folders_and_purges(a0: A0) -> None:
    base = a0.plugin("gone", {"hooks.py": HOOKS, "helpers/x.py": "X = 1\n"})
    a0.write("usr/agents/dev/plugins/gone/config.json", "{}")
    a0.write("usr/projects/proj/.a0proj/plugins/gone/.toggle-0")
    a0.mod("usr.plugins.gone.helpers.x")
    a0.plugins.uninstall_plugin("gone")
    assert (a0.root / "tmp/uninstalled").read_text() == "yes"
    assert not base.exists()
    assert not (a0.root / "usr/agents/dev/plugins/gone").exists()
    assert not (a0.root / "usr/projects/proj/.a0proj/plugins/gone").exists()
    assert "usr.plugins.gone.helpers.x" not in sys.modules
    with pytest.raises(ValueError, match="Only custom plugins"):
        a0.plugins.delete_plugin("_memory")


def test_uninstall_of_a_symlinked_plugin_only_unlinks(a0: A0, tmp_path: Path) -> None:
    target = tmp_path / "checkout"
    (target / "helpers").mkdir(parents=True)
    (target / "plugin.yaml").write_text("name: linked\nversion: '1'\n")
    (target / "helpers" / "keep.py").write_text("KEEP = 1\n")
    (a0.root / "usr/plugins/linked").symlink_to(target, target_is_directory=True)
    a0.plugins.uninstall_plugin("linked")
    assert not (a0.root / "usr/plugins/linked").exists()
    assert (target / "helpers" / "keep.py").is_file()


# --- memory store ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_memory_get_shares_one_store_per_subdir(a0: A0) -> None:
    first = a0.new_agent()
    sub = a0.agent.Agent(1, first.config, first.context)
    one, two, three = await a0.Memory.get(first), await a0.Memory.get(first), await a0.Memory.get(sub)
    assert one is not two and one.db is two.db is three.db
    assert one.memory_subdir == "default"
    in_project = await a0.Memory.get(a0.new_agent(project="proj"))
    assert in_project.memory_subdir == "projects/proj" and in_project.db is not one.db
    assert (await a0.Memory.get_by_subdir("default")).db is one.db
    assert first.context.log.find("util", "Initializing VectorDB in '/default'")


@pytest.mark.anyio
async def test_search_returns_the_stores_own_documents(a0: A0) -> None:
    db = await a0.Memory.get(a0.new_agent())
    doc_id = await db.insert_text("alpha beta", {"area": "main"})
    [found] = await db.search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)
    assert found is db.db.get_all_docs()[doc_id]
    found.metadata["touched"] = True
    [again] = await db.search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)
    assert again.metadata["touched"] is True
    copy = type(found)(page_content=found.page_content, metadata=dict(found.metadata))
    assert copy == found and copy is not found
    with pytest.raises(TypeError):
        hash(found)


@pytest.mark.anyio
async def test_filter_sees_only_fetch_k_20_nearest(a0: A0) -> None:
    db = await a0.Memory.get(a0.new_agent())
    for i in range(25):
        await db.insert_text(f"alpha beta main{i}", {"area": "main"})
    await db.insert_text("alpha beta extra words", {"area": "solutions"})
    solutions = await db.search_similarity_threshold(
        query="alpha beta", limit=8, threshold=0.7, filter="area == 'solutions'"
    )
    assert solutions == []
    unfiltered = await db.search_similarity_threshold(query="alpha beta", limit=30, threshold=0.7)
    assert unfiltered[-1].metadata["area"] == "solutions"
    pairs = await db.db.asimilarity_search_with_relevance_scores(
        "alpha beta",
        k=8,
        score_threshold=0.7,
        filter=a0.Memory._get_comparator("area == 'solutions'"),
        fetch_k=100,
    )
    [(doc, score)] = pairs
    assert doc.page_content == "alpha beta extra words"
    assert score == pytest.approx((1 + 2 / (2 * 2**0.5)) / 2)  # (1 + cos) / 2


@pytest.mark.anyio
async def test_comparator_and_desync_error(a0: A0) -> None:
    cmp = a0.Memory._get_comparator
    assert cmp("area == 'main' or area == 'fragments'")({"area": "fragments"})
    assert not cmp("area=='fragments'")({"area": "main"})
    assert not cmp("area == 'x'")({})  # unknown name -> False, like simpleeval's NameNotDefined
    assert cmp("n >= 2 and tag in ['a', 'b']")({"n": 3, "tag": "b"})
    assert not cmp("__import__('os')")({})
    assert cmp("int(n) > 2 and tags[0] == 'a'")({"n": "3", "tags": ["a"]})
    assert not cmp("area.upper() == 'MAIN'")({"area": "main"})
    db = await a0.Memory.get(a0.new_agent())
    doc_id = await db.insert_text("alpha beta", {"area": "main"})
    del db.db.docstore._dict[doc_id]
    with pytest.raises(ValueError, match="Could not find document for id"):
        await db.search_similarity_threshold(query="alpha beta", limit=3, threshold=0.7)


@pytest.mark.anyio
async def test_delete_by_query_passes_query_positionally_and_loops_by_100(a0: A0) -> None:
    db = await a0.Memory.get(a0.new_agent())
    for _ in range(150):
        await db.insert_text("alpha beta", {"area": "fragments"})
    calls = record_searches(a0)
    removed = await db.delete_documents_by_query(query="alpha beta", threshold=0.9)
    assert len(removed) == 150
    assert [c["args"] for c in calls] == [("alpha beta",), ("alpha beta",)]
    assert calls[0]["kwargs"] == {"limit": 100, "threshold": 0.9, "filter": ""}
    for _ in range(30):
        await db.insert_text("alpha beta", {"area": "fragments"})
    removed = await db.delete_documents_by_query("alpha beta", 0.9, filter="area=='fragments'")
    assert len(removed) == 20  # one round: fetch_k=20 caps a filtered search below limit=100
    assert len(db.db.get_all_docs()) == 10


@pytest.fixture
def newer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[A0]:
    """A stand-in root with the newer upstream memory API."""
    monkeypatch.setenv("A0_STANDIN_MEMORY_API", "newer")
    root = build_a0_root(tmp_path / "a0")
    (root / "usr" / "plugins" / PLUGIN_NAME).unlink()
    with use_root(root):
        yield A0(root)


def test_the_memory_api_is_chosen_when_the_module_is_imported(a0: A0, monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    assert a0.memory.MEMORY_API == "v1.7"
    assert list(inspect.signature(a0.Memory.search_similarity_threshold).parameters) == [
        "self", "query", "limit", "threshold", "filter"]
    assert not hasattr(a0.Memory, "search_similarity_threshold_with_scores")
    monkeypatch.setenv("A0_STANDIN_MEMORY_API", "v2")
    sys.modules.pop("plugins._memory.helpers.memory")
    with pytest.raises(ValueError, match="A0_STANDIN_MEMORY_API must be one of"):
        importlib.import_module("plugins._memory.helpers.memory")


@pytest.mark.anyio
async def test_newer_search_takes_an_embedding_and_gives_scores(newer: A0) -> None:
    db = await newer.Memory.get(newer.new_agent())
    for i in range(25):
        await db.insert_text(f"alpha beta {'gamma ' * (i % 4)}n{i}", {"area": "main" if i % 3 else "solutions"})
    vector = await db.embed_query("alpha beta gamma")
    for search in ({"limit": 12, "threshold": 0.7, "filter": "area == 'main'"}, {"limit": 30, "threshold": 0.6}):
        by_query = await db.search_similarity_threshold("alpha beta gamma", **search)
        by_vector = await db.search_similarity_threshold("ignored", embedding=vector, **search)
        scored = await db.search_similarity_threshold_with_scores("alpha beta gamma", **search)
        assert by_query and len(by_query) == len(by_vector) == len(scored)
        assert all(a is b is c for a, b, (c, _) in zip(by_query, by_vector, scored, strict=True))
        relevances = [score for _, score in scored]
        assert relevances == sorted(relevances, reverse=True) and min(relevances) >= search["threshold"]


@pytest.mark.anyio
async def test_newer_delete_by_query_can_include_exact_matches_and_cascade(newer: A0) -> None:
    from datetime import datetime

    db = await newer.Memory.get(newer.new_agent())
    await db.insert_text("rotate the backup key", {"area": "main"})
    exact = await db.insert_text("Notes: ROTATE  the backup key every month, and log it", {"area": "main"})
    await db.insert_text("a summary", {"area": "main", "sources": f"x1,{exact}"})
    await db.insert_text("unrelated lunch menu", {"area": "main"})
    plain = await db.delete_documents_by_query("rotate the backup key", 0.95)
    assert [d.page_content for d in plain] == ["rotate the backup key"]  # the notes are less similar
    await db.insert_text("rotate the backup key", {"area": "main"})
    removed = await db.delete_documents_by_query("rotate the backup key", 0.95, include_exact=True, cascade=True)
    assert [d.page_content for d in removed] == [
        "rotate the backup key", "Notes: ROTATE  the backup key every month, and log it", "a summary"]
    [left] = db.db.get_all_docs().values()
    assert left.page_content == "unrelated lunch menu"
    assert datetime.fromisoformat(left.metadata["timestamp"]).tzinfo is not None  # ISO timestamps


@pytest.mark.anyio
async def test_store_search_runs_in_an_executor_thread(a0: A0) -> None:
    threads: list[str] = []
    store_class = a0.memory.MyFaiss
    original = store_class.similarity_search_with_score_by_vector

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(self, *args, **kwargs)

    store_class.similarity_search_with_score_by_vector = recording
    db = await a0.Memory.get(a0.new_agent())
    await db.search_similarity_threshold(query="x", limit=1, threshold=0.7)
    assert threads and threads[0] != threading.current_thread().name


# --- recall ------------------------------------------------------------------------------


async def seeded_agent(a0: A0, memories: int = 8, solutions: int = 5) -> Any:
    agent = a0.new_agent()
    db = await a0.Memory.get(agent)
    for i in range(memories):
        await db.insert_text(f"alpha beta fact{i}", {"area": "main" if i % 2 else "fragments"})
    for i in range(solutions):
        await db.insert_text(f"alpha beta fix{i}", {"area": "solutions"})
    agent.hist_add_user_message("alpha beta")
    return agent


@pytest.mark.anyio
async def test_recall_searches_and_truncates_to_5_and_3(a0: A0) -> None:
    agent = await seeded_agent(a0)
    calls = record_searches(a0)
    loop_data = await agent.run_message_loop()
    assert [c["kwargs"] for c in calls] == [
        {
            "query": calls[0]["kwargs"]["query"],
            "limit": 12,
            "threshold": 0.7,
            "filter": "area == 'main' or area == 'fragments'",
        },
        {"query": calls[0]["kwargs"]["query"], "limit": 8, "threshold": 0.7, "filter": "area == 'solutions'"},
    ]
    user_text = 'user: {"user_message": "alpha beta"}'
    assert calls[0]["kwargs"]["query"] == user_text + "\n\n" + user_text
    memories = loop_data.extras_persistent["memories"].strip().split("\n\n")[1:]
    solutions = loop_data.extras_persistent["solutions"].strip().split("\n\n")[1:]
    assert len(memories) == 5 and all(m.startswith("alpha beta fact") for m in memories)
    assert len(solutions) == 3 and all(s.startswith("alpha beta fix") for s in solutions)
    [item] = agent.context.log.find("util", "5 memories and 3 relevant solutions found")
    assert item.kvps["memories"] == "\n\n".join(memories)


@pytest.mark.anyio
async def test_recall_history_is_cut_to_its_last_10000_chars(a0: A0) -> None:
    agent = await seeded_agent(a0, 1, 0)
    agent.hist_add_ai_response("x" * 20000)
    calls = record_searches(a0)
    await agent.run_message_loop()
    query = calls[0]["kwargs"]["query"]
    assert query == 'user: {"user_message": "alpha beta"}\n\n' + agent.history.output_text()[-10000:]


@pytest.mark.anyio
async def test_recall_runs_on_iteration_0_then_every_3(a0: A0) -> None:
    agent = await seeded_agent(a0, 1, 0)
    loop_data = await agent.start_monologue()
    started = []
    for _ in range(7):
        await agent.run_message_loop(loop_data)
        started.append(agent.get_data("_recall_memories_task") is not None)
    assert started == [True, False, False, True, False, False, True]


@pytest.mark.anyio
async def test_delayed_recall_is_not_awaited_in_its_own_pass(a0: A0) -> None:
    a0.save_memory_config(memory_recall_delayed=True)
    agent = await seeded_agent(a0, 1, 0)
    gate = asyncio.Event()
    original = a0.Memory.search_similarity_threshold

    async def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await original(self, *args, **kwargs)

    a0.Memory.search_similarity_threshold = slow
    loop_data = await agent.run_message_loop()
    task = agent.get_data("_recall_memories_task")
    assert not task.done() and "memory_recall_delayed" in loop_data.params_temporary["extras"]
    gate.set()
    await task
    assert "alpha beta fact0" in loop_data.extras_persistent["memories"]


@pytest.mark.anyio
async def test_recall_errors_surface_through_recall_wait(a0: A0) -> None:
    agent = await seeded_agent(a0, 1, 0)
    db = await a0.Memory.get(agent)
    db.db.docstore._dict.clear()
    with pytest.raises(ValueError, match="Could not find document for id"):
        await agent.run_message_loop()


@pytest.mark.anyio
async def test_contextvar_set_before_recall_reaches_the_task_and_executor(a0: A0) -> None:
    a0.plugin("zzprobe", {**SCOPE_PLUGIN, **SCOPE_RESET})
    scope = a0.mod("usr.plugins.zzprobe.helpers.scope")
    agent = await seeded_agent(a0, 2, 1)
    seen: list[tuple[str, Any]] = []
    original_search = a0.Memory.search_similarity_threshold
    store_class = a0.memory.MyFaiss
    original_vector = store_class.similarity_search_with_score_by_vector

    async def in_task(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(("task", scope.RECALL.get()))
        return await original_search(self, *args, **kwargs)

    def in_executor(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append((threading.current_thread().name, scope.RECALL.get()))
        return original_vector(self, *args, **kwargs)

    a0.Memory.search_similarity_threshold = in_task
    store_class.similarity_search_with_score_by_vector = in_executor
    await agent.run_message_loop()
    assert isinstance(agent.get_data("_recall_memories_task"), asyncio.Task)
    assert [value for _, value in seen] == [0, 0, 0, 0]
    assert all(where != threading.current_thread().name for where, _ in seen[1::2])
    assert scope.RECALL.get() is None  # reset in the parent by _51
    seen.clear()
    await agent.call_tool("memory_load", {"query": "alpha beta"})
    assert seen[0] == ("task", None)


@pytest.mark.anyio
@pytest.mark.parametrize("reset", [True, False])
async def test_background_memorize_sees_the_scope_only_if_not_reset(a0: A0, reset: bool) -> None:
    a0.plugin("zzprobe", {**SCOPE_PLUGIN, **(SCOPE_RESET if reset else {})})
    a0.save_memory_config(memory_memorize_consolidation=False)
    scope = a0.mod("usr.plugins.zzprobe.helpers.scope")
    agent = await seeded_agent(a0, 1, 0)
    agent.context.utility_model = lambda system, message: (
        '["alpha beta learned"]' if system.startswith("memorize fragments") else "[]"
    )
    loop_data = await agent.run_message_loop()
    calls = record_searches(a0)
    seen: list[Any] = []
    original = a0.Memory.search_similarity_threshold

    async def probe(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(scope.RECALL.get())
        return await original(self, *args, **kwargs)

    a0.Memory.search_similarity_threshold = probe
    await agent.end_monologue(loop_data)
    await asyncio.to_thread(a0.mod("helpers.defer").wait_for_deferred)
    assert [c["thread"] for c in calls] == ["Background"]
    assert calls[0]["args"] == ("alpha beta learned",)
    assert calls[0]["kwargs"] == {"limit": 100, "threshold": 0.9, "filter": "area=='fragments'"}
    assert seen == ([None] if reset else [0])
    texts = [d.page_content for d in (await a0.Memory.get(agent)).db.get_all_docs().values()]
    assert "alpha beta learned" in texts


# --- memory_load, consolidation, dashboard ----------------------------------------------


@pytest.mark.anyio
async def test_memory_load_tool_defaults_and_tool_extensions(a0: A0) -> None:
    a0.plugin(
        "toolp",
        {
            "helpers/seen.py": "events = []\n",
            "extensions/python/tool_execute_before/_10_t.py": """
            from helpers.extension import Extension
            from usr.plugins.toolp.helpers import seen

            class Before(Extension):
                async def execute(self, tool_args=None, tool_name=None, **kwargs):
                    seen.events.append(("before", tool_name, dict(tool_args)))
            """,
            "extensions/python/tool_execute_after/_10_t.py": """
            from helpers.extension import Extension
            from usr.plugins.toolp.helpers import seen

            class After(Extension):
                async def execute(self, response=None, tool_name=None, **kwargs):
                    seen.events.append(("after", tool_name, response.break_loop))
            """,
        },
    )
    agent = await seeded_agent(a0, 1, 0)
    calls = record_searches(a0)
    response = await agent.call_tool("memory_load", {"query": "alpha beta"})
    assert calls[0]["args"] == ()
    assert calls[0]["kwargs"] == {"query": "alpha beta", "limit": 10, "threshold": 0.7, "filter": ""}
    assert "Content: alpha beta fact0" in response.message and "area: fragments" in response.message
    events = a0.mod("usr.plugins.toolp.helpers.seen").events
    assert events == [("before", "memory_load", {"query": "alpha beta"}), ("after", "memory_load", False)]
    none = await agent.call_tool("memory_load", {"query": "unrelated words"})
    assert none.message.startswith("No memories found for specified query: unrelated words")
    forget = await agent.call_tool("memory_forget", {"query": "alpha"})
    assert forget.message.startswith("Tool memory_forget not found")


@pytest.mark.anyio
async def test_consolidation_ranks_into_the_stores_metadata(a0: A0) -> None:
    agent = a0.new_agent()
    db = await a0.Memory.get(agent)
    for words in ["alpha beta", "alpha beta gamma", "alpha beta gamma delta", "alpha beta other"]:
        await db.insert_text(words, {"area": "fragments"})
    await db.insert_text("alpha beta", {"area": "main"})
    agent.context.utility_model = lambda system, message: '["gamma"]' if "keyword" in system else "{}"
    calls = record_searches(a0)
    consolidation = a0.mod("plugins._memory.helpers.memory_consolidation")
    similar = await consolidation.create_memory_consolidator(agent)._find_similar_memories("alpha beta", "fragments")
    assert [c["kwargs"] for c in calls] == [
        {"query": "alpha beta", "limit": 10, "threshold": 0.7, "filter": "area == 'fragments'"},
        {"query": "gamma", "limit": 10, "threshold": 0.7, "filter": "area == 'fragments'"},
    ]
    assert [d.page_content for d in similar] == [
        "alpha beta",
        "alpha beta gamma",
        "alpha beta other",
        "alpha beta gamma delta",
    ]
    stored = db.db.get_all_docs()
    ranks = [stored[d.metadata["id"]].metadata["_consolidation_similarity"] for d in similar]
    assert ranks == pytest.approx([1.0, 0.9 + 0.1 * 2 / 3, 0.9 + 0.1 / 3, 0.9])
    assert all(stored[d.metadata["id"]] is d for d in similar)


@pytest.mark.anyio
async def test_consolidation_replace_is_blocked_below_safety_threshold(a0: A0) -> None:
    agent = a0.new_agent()
    db = await a0.Memory.get(agent)
    ids = [await db.insert_text(t, {"area": "fragments"}) for t in ["alpha beta", "alpha beta gamma"]]
    answer = {"action": "replace", "memories_to_remove": ids, "new_memory_content": "alpha beta new"}
    agent.context.utility_model = lambda system, message: "[]" if "keyword" in system else json.dumps(answer)
    consolidation = a0.mod("plugins._memory.helpers.memory_consolidation")
    db.db.get_all_docs()[ids[1]].metadata["_consolidation_similarity"] = 0.5
    result = await consolidation.create_memory_consolidator(agent, max_similar_memories=1).process_new_memory(
        "alpha beta", "fragments", {"area": "fragments"}
    )
    assert result["success"]
    docs = db.db.get_all_docs()
    assert set(ids) <= set(docs)  # ids[1] kept its 0.5 (not re-ranked): replace became keep-separate
    assert docs[result["memory_ids"][0]].metadata["consolidation_action"] == "keep_separate_safety"


def test_dashboard_search_through_the_api_route(a0: A0) -> None:
    calls = record_searches(a0)
    result = a0.mod("helpers.api").dispatch_plugin_api(
        "_memory", "memory_dashboard", {"action": "search", "search": "alpha"}
    )
    assert result.status == 200 and result.json()["success"] is True
    assert calls[0]["kwargs"] == {"query": "alpha", "limit": 100, "threshold": 0.6, "filter": ""}
    assert calls[0]["thread"] == "FlaskRequest"


# --- API handlers ---------------------------------------------------------------------------------------


API_FILES = {
    "api/echo.py": """
        import threading
        from helpers.api import ApiHandler, Request, Response

        class Echo(ApiHandler):
            async def process(self, input, request):
                if input.get("boom"):
                    raise RuntimeError("boom")
                if input.get("raw"):
                    return Response("raw", status=202, mimetype="text/plain")
                return {"echo": input, "thread": threading.current_thread().name}
        """,
    "api/secure.py": """
        from helpers.api import ApiHandler

        class Secure(ApiHandler):
            @classmethod
            def requires_loopback(cls):
                return True

            @classmethod
            def requires_api_key(cls):
                return True

            @classmethod
            def requires_auth(cls):
                return False

            async def process(self, input, request):
                return {"ok": True}
        """,
    "api/getter.py": """
        from helpers.api import ApiHandler

        class Getter(ApiHandler):
            @classmethod
            def get_methods(cls):
                return ["GET"]

            async def process(self, input, request):
                return {"input": input}
        """,
}


def test_api_dispatch_statuses_and_security(a0: A0) -> None:
    a0.plugin("apip", API_FILES)
    api = a0.mod("helpers.api")
    call = api.dispatch_plugin_api
    ok = call("apip", "echo", {"x": 1})
    assert (ok.status, ok.mimetype) == (200, "application/json")
    assert ok.json() == {"echo": {"x": 1}, "thread": "FlaskRequest"}
    boom = call("apip", "echo", {"boom": True})
    assert (boom.status, boom.mimetype) == (500, "text/plain") and "RuntimeError: boom" in boom.body
    assert (call("apip", "echo", {"raw": True}).status, call("apip", "echo", {"raw": 1}).body) == (202, "raw")
    assert call("apip", "nope", {}).status == 404
    assert call("apip", "echo", {}, method="GET").status == 405
    assert call("apip", "getter", None, method="GET").json() == {"input": {}}
    assert call("apip", "echo", {}, csrf_ok=False).status == 403
    assert call("apip", "secure", {}, remote_addr="10.1.2.3").status == 403
    assert call("apip", "secure", {}).body == "API key required"
    assert call("apip", "secure", {}, headers={"X-API-KEY": "wrong"}).status == 401
    assert call("apip", "secure", {"api_key": "standin-token"}).json() == {"ok": True}
    a0.plugins.toggle_plugin("apip", False)
    assert call("apip", "echo", {"x": 2}).status == 200  # handlers dispatch while disabled
    assert api.ApiHandler.requires_csrf() is True and api.ApiHandler.get_methods() == ["POST"]


@pytest.mark.anyio
async def test_api_async_dispatch_runs_on_the_callers_loop(a0: A0) -> None:
    a0.plugin("apip", API_FILES)
    result = await a0.mod("helpers.api").dispatch_plugin_api_async("apip", "echo", {"y": 2})
    assert result.json() == {"echo": {"y": 2}, "thread": threading.current_thread().name}


# --- tools, log ----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_tool_resolves_only_enabled_plugins(a0: A0) -> None:
    a0.plugin(
        "toolz",
        {
            "tools/hello.py": """
        from helpers.tool import Response, Tool

        class Hello(Tool):
            async def execute(self, name="", **kwargs):
                return Response(message=f"hello {name}", break_loop=True, additional={"k": 1})
        """
        },
    )
    agent = a0.new_agent()
    response = await agent.call_tool("hello", {"name": "a0"})
    assert (response.message, response.break_loop, response.additional) == ("hello a0", True, {"k": 1})
    assert agent.history.messages[-1].content["tool_result"] == "hello a0"
    a0.plugins.toggle_plugin("toolz", False)
    unknown = await a0.new_agent().call_tool("hello", {})
    assert unknown.message.startswith("Tool hello not found")


SKILL_MD = """\
    ---
    name: {name}
    description: {description}
    allowed-tools:
      - hello
    ---

    # {name}

    Call the hello tool.
    """


@pytest.mark.anyio
async def test_the_system_prompt_holds_main_tool_prompts_and_skill_listing_of_enabled_plugins(a0: A0) -> None:
    a0.plugin("toolz", {"prompts/agent.system.tool.hello.md": "### hello\nsays hello\n",
                        "skills/say-hello/SKILL.md": SKILL_MD.format(name="say-hello", description="Greets twice.")})
    agent = a0.new_agent()
    agent.hist_add_user_message("hi")
    parts = (await agent.run_message_loop()).system
    main, tools, skills = parts
    assert main.startswith("# Agent Zero System Manual")
    assert tools.startswith("## available tools") and tools.index("### hello") < tools.index("### response")
    assert "### skills_tool" in tools
    assert skills.startswith("# Available skills") and "**say-hello** Greets twice." in skills
    assert "**create-skill** (stand-in)" in skills  # A0's own skills are listed too

    a0.plugins.toggle_plugin("toolz", False)
    parts = await a0.new_agent().get_system_prompt(a0.agent.LoopData())
    assert "### hello" not in parts[1] and "say-hello" not in parts[2]


def test_skills_are_validated_deduplicated_by_name_and_listed_globally_when_disabled(a0: A0) -> None:
    skills = a0.mod("helpers.skills")
    a0.plugin("aaa", {"skills/dup/SKILL.md": SKILL_MD.format(name="dup", description="from aaa"),
                      "skills/bad/SKILL.md": SKILL_MD.format(name="Bad_Name", description="x")})
    a0.plugin("bbb", {"skills/dup/SKILL.md": SKILL_MD.format(name="dup", description="from bbb")})
    agent = a0.new_agent()
    by_agent = {s.name: s.description for s in skills.list_skills(agent=agent)}
    assert by_agent["dup"] == "from aaa" and "Bad_Name" not in by_agent
    a0.plugins.toggle_plugin("aaa", False)
    assert {s.name: s.description for s in skills.list_skills(agent=a0.new_agent())}["dup"] == "from bbb"
    assert sorted(s.description for s in skills.list_skills() if s.name == "dup") == ["from aaa", "from bbb"]


@pytest.mark.anyio
async def test_skills_tool_lists_and_loads_and_the_loaded_skill_enters_the_extras(a0: A0) -> None:
    long = "x" * 300
    a0.plugin("toolz", {"skills/say-hello/SKILL.md": SKILL_MD.format(name="say-hello", description=long)})
    agent = a0.new_agent()
    listed = (await agent.call_tool("skills_tool", {"method": "list"})).message
    assert f"- say-hello: {'x' * 200}…" in listed and "- create-skill v1.0.0: (stand-in)" in listed
    missing = await agent.call_tool("skills_tool", {"method": "load", "skill_name": "nope"})
    assert missing.message.startswith("Error: skill not found: 'nope'")
    loaded = await agent.call_tool("skills_tool", {"method": "load", "skill_name": "**say-hello**"})
    assert loaded.message == "Loaded skill 'say-hello' into EXTRAS." and agent.data["loaded_skills"] == ["say-hello"]
    agent.hist_add_user_message("hi")
    extras = (await agent.run_message_loop()).extras_persistent["loaded_skills"]
    assert extras.startswith("# loaded skills") and "Skill: say-hello" in extras
    assert "Allowed tools: hello" in extras and "Call the hello tool." in extras


def test_log_items_and_updates(a0: A0) -> None:
    agent = a0.new_agent()
    log = agent.context.log
    item = log.log(type="util", heading="Searching memories...", kvps={"a": 1}, extra="x")
    item.update(heading="done", query="q")
    item.stream(query="!")
    assert (item.type, item.heading, dict(item.kvps)) == ("util", "done", {"a": 1, "extra": "x", "query": "q!"})
    assert log.output()[0]["heading"] == "done" and log.find("util", "done") == [item]
    agent.context.streaming_agent = a0.agent.Agent(2, agent.config, agent.context)
    assert log.log(type="info", heading="sub").agentno == 2
    log.reset()
    item.update(heading="ignored")
    assert item.heading == "done" and log.logs == []


@pytest.mark.anyio
async def test_reset_state_clears_process_wide_state(a0: A0) -> None:
    agent = a0.new_agent()
    await a0.Memory.get(agent)
    defer = a0.mod("helpers.defer")
    task = defer.DeferredTask("Background").start_task(asyncio.sleep, 0)
    await task.result(timeout=5)
    assert a0.Memory.index and a0.agent.AgentContext.all() and defer.EventLoopThread._instances
    a0.mod("helpers.standin").reset_state()
    assert a0.Memory.index == {} and a0.agent.AgentContext.all() == []
    assert defer.EventLoopThread._instances == {}


# --- agent profiles, sub-agents and the lists the settings modal shows (issue 14) ------------------------


@pytest.mark.anyio
async def test_call_subordinate_builds_the_sub_agent_with_its_profile_in_the_same_context(a0: A0) -> None:
    superior = a0.new_agent(profile="agent0")
    await superior.call_tool("call_subordinate", {"message": "hello", "profile": "researcher"})
    sub = superior.get_data("_subordinate")
    assert (sub.number, sub.config.profile, sub.context) == (1, "researcher", superior.context)
    assert sub.get_data("_superior") is superior
    await superior.call_tool("call_subordinate", {"message": "again"})
    assert superior.get_data("_subordinate") is sub  # reused until reset="true"
    await superior.call_tool("call_subordinate", {"message": "new", "reset": "true"})
    assert superior.get_data("_subordinate") is not sub
    assert superior.get_data("_subordinate").config.profile == "agent0"  # no profile given: initialize_agent's


def test_agent_profiles_and_projects_are_listed_as_the_settings_modal_gets_them(a0: A0) -> None:
    a0.write("agents/agent0/agent.yaml", "title: Agent 0\n")
    a0.write("usr/agents/researcher/agent.yaml", "title: Researcher\n")
    a0.write("usr/agents/no_profile/readme.md", "no agent.yaml: not a profile")
    a0.write("usr/projects/alpha/.a0proj/project.json", '{"title": "Project Alpha"}')
    (a0.root / "usr/projects/beta").mkdir(parents=True)
    assert a0.mod("helpers.subagents").get_all_agents_list() == [
        {"key": "agent0", "label": "Agent 0"}, {"key": "researcher", "label": "Researcher"}]
    projects = a0.mod("helpers.projects").get_active_projects_list()
    assert [(p["name"], p["title"]) for p in projects] == [("alpha", "Project Alpha"), ("beta", "")]
