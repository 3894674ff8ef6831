"""A0 `helpers/functions.safe_call`: pass a function only the arguments it declares."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def safe_call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    params = inspect.signature(func).parameters
    kinds = {p.kind for p in params.values()}
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        positional = sum(
            1
            for p in params.values()
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        )
        args = args[:positional]
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return func(*args, **kwargs)
