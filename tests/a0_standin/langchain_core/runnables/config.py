"""`langchain_core.runnables.config.run_in_executor`: runs `func` in the loop's default executor
inside a COPY of the caller's context, so ContextVars are visible in the worker thread (as with
the real FAISS search)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in_executor(executor_or_config: Any, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    def wrapper() -> T:
        try:
            return func(*args, **kwargs)
        except StopIteration as exc:
            raise RuntimeError from exc

    loop = asyncio.get_running_loop()
    if executor_or_config is None or isinstance(executor_or_config, dict):
        return await loop.run_in_executor(None, partial(contextvars.copy_context().run, wrapper))
    return await loop.run_in_executor(executor_or_config, wrapper)
