"""What our A0 extensions do, one function per seam. A0 does not catch exceptions raised by
extensions, so every function here swallows and logs its own errors: a reranker problem must never
break an agent's loop."""

from __future__ import annotations

import logging
from typing import Any, Final

from . import memory_patch, recall_scope, settings

log = logging.getLogger("a0_reranker")

MEMORY_LOAD_TOOL: Final = "memory_load"


def on_startup() -> None:
    """``startup_migration``: wrap the memory search before the first chat starts."""
    _install("startup")


def on_agent_init(agent: Any) -> None:
    """``agent_init`` (every new agent, subordinates included): make sure the wrapper is in place."""
    _install("agent_init")


def before_recall(agent: Any) -> None:
    """``message_loop_prompts_after/_49``: re-check the wrapper (cheap), then open the recall scope."""
    try:
        memory_patch.ensure_installed()
        recall_scope.begin(agent, "recall")
    except Exception:
        log.exception("a0_reranker: could not open the recall scope")


def after_recall(agent: Any) -> None:
    """``message_loop_prompts_after/_51``: close the scope in the loop's own context, so memorize and
    consolidation started later at ``monologue_end`` do not inherit it (the recall task kept its copy)."""
    _close_scope()


def before_tool(agent: Any, tool_name: str | None) -> None:
    """``tool_execute_before``: the ``memory_load`` tool's search is a recall too."""
    if tool_name != MEMORY_LOAD_TOOL:
        return
    try:
        memory_patch.ensure_installed()
        recall_scope.begin(agent, "memory_load")
    except Exception:
        log.exception("a0_reranker: could not open the memory_load scope")


def after_tool(agent: Any, tool_name: str | None) -> None:
    """``tool_execute_after``: close the ``memory_load`` scope."""
    if tool_name == MEMORY_LOAD_TOOL:
        _close_scope()


def on_monologue_end(agent: Any) -> None:
    """``monologue_end``, before memorize starts its background task: clear a scope that a failed
    recall or tool left open (A0 skips the later extensions of a point when one raises)."""
    _close_scope()


def _close_scope() -> None:
    try:
        recall_scope.end()
    except Exception:
        log.exception("a0_reranker: could not close the recall scope")


def _install(seam: str) -> None:
    try:
        if settings.installed():
            memory_patch.ensure_installed()
    except Exception:
        log.exception("a0_reranker: could not wrap the memory search at %s", seam)
