"""A0 `helpers/extension.py`: Python extension points and the `@extensible` decorator.

- Discovery: `subagents.get_paths(agent, "extensions/python", point)` (usr, enabled plugins in name
  order, core `extensions/python`, plus project/profile folders).
- Classes are de-duplicated by file name (first path wins) and run sorted by file name.
- One `Extension` subclass per file (`modules.load_classes_from_folder`, reverse-name scan).
- Files are loaded by path under their stem, outside `sys.modules`; caches hold the classes until
  `after_plugin_change` clears `*(extensions)*`, after which module-level code runs again.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from helpers import cache, files, modules

if TYPE_CHECKING:
    from agent import Agent

_EXTENSIONS_CACHE_AREA = "extension_folder_classes(extensions)"
_CLASSES_CACHE_AREA = "extension_classes(extensions)"


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


class Extension:
    """Base class: instantiated as `cls(agent=agent)`, then `execute(**kwargs)` (sync or async)."""

    def __init__(self, agent: Agent | None, **kwargs: Any) -> None:
        self.agent: Agent | None = agent
        self.kwargs = kwargs

    def execute(self, **kwargs: Any) -> Awaitable[None] | None:
        return None


async def call_extensions_async(extension_point: str, agent: Agent | None = None, **kwargs: Any) -> None:
    """Run every extension of the point in order; awaitable results are awaited."""
    for cls in _get_extension_classes(extension_point, agent=agent):
        result = cls(agent=agent).execute(**kwargs)
        if isinstance(result, Awaitable):
            await result


def call_extensions_sync(extension_point: str, agent: Agent | None = None, **kwargs: Any) -> None:
    """Run every extension of the point; an awaitable result raises ValueError (A0 behaviour)."""
    for cls in _get_extension_classes(extension_point, agent=agent):
        result = cls(agent=agent).execute(**kwargs)
        if isinstance(result, Awaitable):
            if inspect.iscoroutine(result):
                result.close()
            raise ValueError(f"Extension {cls.__name__} returned awaitable in sync mode")


def _file_of(cls: type) -> str:
    return cls.__module__.split(".")[-1]


def _get_extension_classes(extension_point: str, agent: Agent | None = None) -> list[type[Extension]]:
    from helpers import subagents

    key = cache.determine_cache_key(agent, extension_point)
    cached = cache.get(_CLASSES_CACHE_AREA, key)
    if cached is not None:
        return cached
    unique: dict[str, type[Extension]] = {}
    for path in subagents.get_paths(agent, "extensions/python", extension_point):
        for cls in _get_extensions(path):
            unique.setdefault(_file_of(cls), cls)
    classes = sorted(unique.values(), key=_file_of)
    cache.add(_CLASSES_CACHE_AREA, key, classes)
    return classes


def _get_extensions(folder: str) -> list[type[Extension]]:
    folder = files.get_abs_path(folder)
    cached = cache.get(_EXTENSIONS_CACHE_AREA, folder)
    if cached is not None:
        return cached
    if not files.exists(folder):
        return []
    classes = modules.load_classes_from_folder(folder, "*", Extension)
    cache.add(_EXTENSIONS_CACHE_AREA, folder, classes)
    return classes


def clear_extension_cache() -> None:
    """What A0's extensions watchdog does on a change under an extensions folder."""
    cache.clear(_EXTENSIONS_CACHE_AREA)
    cache.clear(_CLASSES_CACHE_AREA)


# --- @extensible -------------------------------------------------------------


def _points_for(func: Callable[..., Any]) -> tuple[str, str] | None:
    module_parts = [p for p in getattr(func, "__module__", "").split(".") if p]
    qual_parts = [p for p in getattr(func, "__qualname__", "").split(".") if p and p != "<locals>"]
    if not module_parts or not qual_parts:
        return None
    base = os.path.join("_functions", *module_parts, *qual_parts)
    return os.path.join(base, "start"), os.path.join(base, "end")


def _find_agent(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Agent | None:
    """The first initialised `Agent` in kwargs["agent"] or in args; nothing else is searched."""
    from agent import Agent

    for candidate in (kwargs.get("agent"), *args):
        if isinstance(candidate, Agent) and getattr(candidate, "__dict__", None):
            return candidate
    return None


def _raise_or_result(data: dict[str, Any]) -> Any:
    exc = data.get("exception")
    if isinstance(exc, BaseException):
        raise exc
    return data.get("result")


def _call_args(data: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    args = data.get("args")
    kwargs = data.get("kwargs")
    if not isinstance(args, tuple):
        args = (args,)
    if not isinstance(kwargs, dict):
        kwargs = {}
    return args, kwargs


def extensible(func: Callable[..., Any]) -> Callable[..., Any]:
    """Emit `_functions/<module parts>/<qualname parts>/{start,end}` around every call of `func`.

    Both points get the same mutable `data` dict (`args`, `kwargs`, `result`, `exception`). A start
    handler that sets `result` skips the original; a set `exception` is raised before the original
    (end handlers then do not run); end handlers may replace `result` or clear `exception`.
    Exceptions raised by handlers themselves propagate.
    """

    def prepare(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str, Any, dict[str, Any]] | None:
        points = _points_for(func)
        if points is None:
            return None
        data = {"args": args, "kwargs": kwargs, "result": _UNSET, "exception": None}
        return points[0], points[1], _find_agent(args, kwargs), data

    async def _run_async(*args: Any, **kwargs: Any) -> Any:
        prepared = prepare(args, kwargs)
        if prepared is None:
            return await func(*args, **kwargs)
        start, end, agent, data = prepared
        await call_extensions_async(start, agent=agent, data=data)
        if _raise_or_result(data) is _UNSET:
            call_args, call_kwargs = _call_args(data)
            try:
                data["result"] = await func(*call_args, **call_kwargs)
            except Exception as e:
                data["exception"] = e
        await call_extensions_async(end, agent=agent, data=data)
        result = _raise_or_result(data)
        return None if result is _UNSET else result

    def _run_sync(*args: Any, **kwargs: Any) -> Any:
        prepared = prepare(args, kwargs)
        if prepared is None:
            return func(*args, **kwargs)
        start, end, agent, data = prepared
        call_extensions_sync(start, agent=agent, data=data)
        if _raise_or_result(data) is _UNSET:
            call_args, call_kwargs = _call_args(data)
            try:
                data["result"] = func(*call_args, **call_kwargs)
            except Exception as e:
                data["exception"] = e
        call_extensions_sync(end, agent=agent, data=data)
        result = _raise_or_result(data)
        return None if result is _UNSET else result

    if inspect.iscoroutinefunction(func):
        return wraps(func)(_run_async)
    return wraps(func)(_run_sync)
