"""The recall scope: which memory searches are A0's recall (or the ``memory_load`` tool) and for which
agent, and what our A0 extensions do, one function per seam, to open and close it and to keep the
memory search wrapped.

Our ``message_loop_prompts_after`` extensions set it just before A0's ``_50_recall_memories`` and clear
it just after; ``_50`` starts its search task in between, and the task keeps a copy of the value
(ContextVars are copied into ``create_task``). Deletion, consolidation, the dashboard and the
background memorize thread never see it, so the memory wrapper passes those straight through.

The ContextVar lives in the process-wide anchor (``process.singletons``), not in this module: A0
purges ``usr.plugins.*`` modules at runtime, and the wrapper installed before a purge must read the
same variable our freshly imported extensions write after it.

A0 does not catch exceptions raised by extensions, so every seam function swallows and logs its own
errors: a reranker problem must never break an agent's loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..process.singletons import PerProcess
from . import memory_patch, settings

log = logging.getLogger("a0_reranker")

Source = Literal["recall", "memory_load"]
MEMORY_LOAD_TOOL: Final = "memory_load"


@dataclass(frozen=True)
class RecallScope:
    """A search in this context is a recall of ``agent`` (read by attribute only: the class itself
    is re-created by every module purge)."""

    agent: Any
    source: Source


_SCOPE: Final[PerProcess[ContextVar[RecallScope | None]]] = PerProcess(
    "recall_scope", lambda: ContextVar("a0_reranker_recall_scope", default=None))


def current() -> RecallScope | None:
    """The scope of the running context, or None outside recall."""
    return _SCOPE.get().get()


def begin(agent: Any, source: Source) -> None:
    """Mark the searches that follow in this context (and tasks started from it) as a recall."""
    _SCOPE.get().set(RecallScope(agent, source))


def end() -> None:
    """Leave the scope. A plain reset to None, not a token reset: a scope left over by a failed
    ``memory_load`` must not come back when the next recall ends."""
    _SCOPE.get().set(None)


@contextmanager
def suspended() -> Iterator[None]:
    """No scope inside the block: the pool fetch must not be reranked by a nested wrapper."""
    var = _SCOPE.get()
    token = var.set(None)
    try:
        yield
    finally:
        var.reset(token)


# --- the seams -----------------------------------------------------------------------------------------


def on_startup() -> None:
    """``startup_migration``: wrap the memory search before the first chat starts."""
    _install("startup")


def on_agent_init(agent: Any) -> None:
    """``agent_init`` (every new agent, subordinates included): make sure the wrapper is in place."""
    _install("agent_init")


def before_recall(agent: Any) -> None:
    """``message_loop_prompts_after/_49``: re-check the wrapper (cheap), then open the recall scope."""
    _open(agent, "recall")


def after_recall(agent: Any) -> None:
    """``message_loop_prompts_after/_51``: close the scope in the loop's own context, so memorize and
    consolidation started later at ``monologue_end`` do not inherit it (the recall task kept its copy)."""
    _close()


def before_tool(agent: Any, tool_name: str | None) -> None:
    """``tool_execute_before``: the ``memory_load`` tool's search is a recall too."""
    if tool_name == MEMORY_LOAD_TOOL:
        _open(agent, "memory_load")


def after_tool(agent: Any, tool_name: str | None) -> None:
    """``tool_execute_after``: close the ``memory_load`` scope."""
    if tool_name == MEMORY_LOAD_TOOL:
        _close()


def on_monologue_end(agent: Any) -> None:
    """``monologue_end``, before memorize starts its background task: clear a scope that a failed
    recall or tool left open (A0 skips the later extensions of a point when one raises)."""
    _close()


def _open(agent: Any, source: Source) -> None:
    try:
        memory_patch.ensure_installed()
        begin(agent, source)
    except Exception:
        log.exception("a0_reranker: could not open the %s scope", source)


def _close() -> None:
    try:
        end()
    except Exception:
        log.exception("a0_reranker: could not close the recall scope")


def _install(seam: str) -> None:
    try:
        if settings.installed():
            memory_patch.ensure_installed()
    except Exception:
        log.exception("a0_reranker: could not wrap the memory search at %s", seam)
