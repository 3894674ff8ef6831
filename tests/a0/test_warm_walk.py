"""The walk of a warm recall: from A0's wrapped memory search to the HTTP request and back, which of
the project's modules run, on A0's thread and on the owner loop's, seen by a profiler on both. The
table in docs/architecture.md names them; this keeps it true and the walk from growing."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from support.a0_layout import PLUGIN_NAME, REPO_ROOT
from support.servers import RunningServer
from usr.plugins.a0_reranker.service import runtime

from .conftest import A0

pytestmark = pytest.mark.anyio

MEMORIES = 16
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
_MARK = f"/usr/plugins/{PLUGIN_NAME}/"


def _module(filename: str) -> str | None:
    """``service.runtime`` for a file of ours; None for anything else (A0's, the standard library's,
    a dependency's), our A0 extensions (the walk starts at the wrapped search) and tests."""
    real = str(Path(filename).resolve())
    root = str(REPO_ROOT.resolve()) + "/"
    if _MARK in filename:
        relative = filename.split(_MARK, 1)[1]
    elif real.startswith(root):
        relative = real[len(root):]
    else:
        return None
    if relative.startswith(("extensions/", "tests/", ".")) or not relative.endswith(".py"):
        return None
    return relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


class Walk:
    """Every module of ours with a Python frame called while it records, on any thread it was set on."""

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self._lock = threading.Lock()

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            module = _module(frame.f_code.co_filename)
            if module is not None:
                with self._lock:
                    self.modules.add(module)


def documented_walk() -> set[str]:
    """The modules the warm-recall table of docs/architecture.md names, as ``layer.module``."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    modules = set()
    for layer, names in re.findall(r"^\| `(\w+)/` \(\d+\) \| (.+) \|$", text, re.M):
        modules.update(f"{layer}.{name}" for name in re.findall(r"`([\w.]+)`", names))
    return modules


async def warm_recall(a0: A0, agent: Any) -> None:
    agent.hist_add_user_message("alpha beta")
    await agent.run_message_loop()


async def test_a_warm_recall_runs_the_modules_the_architecture_names(a0: A0, server: RunningServer) -> None:
    agent = a0.new_agent()
    await a0.seed(agent, MEMORIES)
    await warm_recall(a0, agent)  # cold: the route is detected, the connection opened
    assert server.count("/rerank") >= 1
    walk = Walk()
    owner = runtime.runtime().owner

    async def on_owner(profile: Any) -> None:
        sys.setprofile(profile)

    owner.call(on_owner, walk.profile)
    sys.setprofile(walk.profile)
    try:
        before = server.count("/rerank")
        await warm_recall(a0, agent)
    finally:
        sys.setprofile(None)
        owner.call(on_owner, None)
    assert server.count("/rerank") == before + 1  # reranked by one request: the walk is a warm recall's
    assert walk.modules == documented_walk(), sorted(walk.modules)
    stated = re.search(r"a warm recall passes through (\d+) of the", ARCHITECTURE.read_text(encoding="utf-8"))
    assert stated is not None and int(stated.group(1)) == len(walk.modules)
