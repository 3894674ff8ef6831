"""The recall scope: which memory searches are A0's recall (or the ``memory_load`` tool) and for which agent.

Our ``message_loop_prompts_after`` extensions set it just before A0's ``_50_recall_memories`` and clear
it just after; ``_50`` starts its search task in between, and the task keeps a copy of the value
(ContextVars are copied into ``create_task``). Deletion, consolidation, the dashboard and the
background memorize thread never see it, so the memory wrapper passes those straight through.

The ContextVar lives in the process-wide anchor (``process.singletons``), not in this module: A0
purges ``usr.plugins.*`` modules at runtime, and the wrapper installed before a purge must read the
same variable our freshly imported extensions write after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..process.singletons import PerProcess

Source = Literal["recall", "memory_load"]


@dataclass(frozen=True)
class RecallScope:
    """A search in this context is a recall of ``agent`` (read by attribute only: the class itself
    is re-created by every module purge)."""

    agent: Any
    source: Source


_SCOPE: Final[PerProcess[ContextVar[RecallScope | None]]] = PerProcess(
    "recall_scope", lambda: ContextVar("a0_reranker_recall_scope", default=None))


def _var() -> ContextVar[RecallScope | None]:
    return _SCOPE.get()


def current() -> RecallScope | None:
    """The scope of the running context, or None outside recall."""
    return _var().get()


def begin(agent: Any, source: Source) -> None:
    """Mark the searches that follow in this context (and tasks started from it) as a recall."""
    _var().set(RecallScope(agent, source))


def end() -> None:
    """Leave the scope. A plain reset to None, not a token reset: a scope left over by a failed
    ``memory_load`` must not come back when the next recall ends."""
    _var().set(None)


@contextmanager
def suspended() -> Iterator[None]:
    """No scope inside the block: the pool fetch must not be reranked by a nested wrapper."""
    var = _var()
    token = var.set(None)
    try:
        yield
    finally:
        var.reset(token)
