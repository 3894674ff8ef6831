"""Fixtures for the A0 integration tests: a fresh A0 stand-in root per test, the plugin imported
through ``usr.plugins.a0_reranker`` exactly as A0 does, and seeded memories whose stock order and
reranked order are known.

Every test of this tier runs twice, once per memory API of the stand-in: A0 v1.7's and the newer
upstream one (``embedding=``, ``search_similarity_threshold_with_scores``, ``delete_documents_by_query``
with ``include_exact``/``cascade``); see ``MEMORY_APIS``.

The plugin folder in each root is a real directory of symlinks into the repository, so the config
and toggle files a test writes (global scope included) stay in the temporary root and never touch
the shared working tree.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers.standin import use_root

from support.a0_layout import PLUGIN_NAME, build_overlay_root
from support.servers import RunningServer, lexical_scorer, start_server
from usr.plugins.a0_reranker.service import runtime

PROFILE = "agent0"
MEM_FILTER = "area == 'main' or area == 'fragments'"
SOL_FILTER = "area == 'solutions'"
SECRET_KEY = "sk-test-a0r-7f3c9e1d4b"
MEMORY_APIS = ("v1.7", "newer")  # the stand-in's A0_STANDIN_MEMORY_API values


def prio_scorer(query: str, document: str) -> float:
    """The test servers' relevance: documents marked ``prioNN`` rank by NN (higher first), above
    everything else; other documents (the detection probe's) by the lexical scorer, halved."""
    marked = re.search(r"\bprio(\d+)\b", document)
    if marked:
        return 0.5 + 0.02 * int(marked.group(1))
    return 0.49 * lexical_scorer(query, document)


def memory_text(k: int) -> str:
    """Memory ``k``: embedding search ranks it k-th (k extra words lower its cosine), the reranker
    ranks it by ``prio{k}``, i.e. in reverse."""
    extras = " ".join(f"pad{k}w{j}" for j in range(k))
    return f"alpha beta alpha beta prio{k:02d} {extras}".strip()


@dataclass
class A0:
    """One A0 root made importable; properties re-import, so they follow purges."""

    root: Path

    def mod(self, name: str) -> ModuleType:
        return importlib.import_module(name)

    def ours(self, name: str) -> ModuleType:
        """A module of the plugin as A0 imports it now."""
        return self.mod(f"usr.plugins.{PLUGIN_NAME}.{name}")

    @property
    def plugins(self) -> Any:
        return self.mod("helpers.plugins")

    @property
    def Memory(self) -> Any:
        return self.mod("plugins._memory.helpers.memory").Memory

    @property
    def plugin_dir(self) -> Path:
        return self.root / "usr" / "plugins" / PLUGIN_NAME

    def configure(self, profile: str = PROFILE, **settings: Any) -> None:
        """Save ``rerank_<key>`` settings at an agent-profile scope (only changed keys: the plugin merges)."""
        self.plugins.save_plugin_config(PLUGIN_NAME, "", profile, {f"rerank_{k}": v for k, v in settings.items()})

    def configure_global(self, **settings: Any) -> None:
        path = self.plugin_dir / "config.json"
        path.write_text(json.dumps({f"rerank_{k}": v for k, v in settings.items()}), encoding="utf-8")

    def new_agent(self, profile: str = PROFILE, project: str | None = None) -> Any:
        agent_module = self.mod("agent")
        data = {"project": project} if project else None
        return agent_module.AgentContext(agent_module.AgentConfig(profile=profile), data=data).agent0

    async def seed(self, agent: Any, count: int = 12, area: str = "main") -> list[str]:
        db = await self.Memory.get(agent)
        return [await db.insert_text(memory_text(k), {"area": area}) for k in range(count)]

    async def original_search(self, agent: Any, **call: Any) -> list[Any]:
        """What stock A0's search returns: the method under our wrapper, called directly."""
        memory = await self.Memory.get(agent)
        method = self.Memory.search_similarity_threshold
        while hasattr(method, "__wrapped__"):
            method = method.__wrapped__
        return list(await method(memory, **call))

    def recall_lines(self, agent: Any) -> list[str]:
        """The plugin's lines in the agent's A0 log."""
        return [item.heading for item in agent.context.log.logs if "Rerank" in item.heading]

    async def store_calls(self, agent: Any) -> list[dict[str, Any]]:
        """Record every search that reaches the vector store (below the wrapper): query, k, thread."""
        store = (await self.Memory.get(agent)).db
        calls: list[dict[str, Any]] = []
        original = store.asearch

        async def recording(query: str, search_type: str, **kwargs: Any) -> Any:
            calls.append({"query": query, "k": kwargs.get("k"), "thread": threading.current_thread().name})
            return await original(query, search_type, **kwargs)

        store.asearch = recording
        return calls


def memories_prompt(agent: Any, docs: list[Any]) -> str:
    """What A0's recall puts in ``extras_persistent["memories"]`` for these documents (first 5)."""
    text = "\n\n".join(d.page_content for d in docs[:5])
    return str(agent.parse_prompt("agent.system.memories.md", memories=text))


@pytest.fixture(params=MEMORY_APIS)
def memory_api(request: pytest.FixtureRequest) -> str:
    """Which of the stand-in's memory APIs this test runs against."""
    return str(request.param)


@pytest.fixture
def a0(tmp_path: Path, memory_api: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[A0]:
    monkeypatch.setenv("A0_STANDIN_MEMORY_API", memory_api)  # read when the root imports its memory module
    root = build_overlay_root(tmp_path / "a0")
    try:
        with use_root(root):
            a0 = A0(root)
            assert memory_api == a0.mod("plugins._memory.helpers.memory").MEMORY_API
            yield a0
    finally:
        runtime.shutdown()  # a fresh owner loop per test: no breaker or detection cache from another server


@pytest.fixture(autouse=True)
def fresh_counters() -> Iterator[None]:
    runtime.stats_recorder().reset()
    yield


@pytest.fixture
async def server(a0: A0) -> AsyncIterator[RunningServer]:
    """An Infinity-speaking reranker that scores by the memories' priority, set as the agent's endpoint."""
    srv = await start_server("infinity", scorer=prio_scorer)
    a0.configure(endpoint=srv.url, timeout=10)
    yield srv
    await srv.close()
