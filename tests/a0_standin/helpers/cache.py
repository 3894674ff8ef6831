"""A0 `helpers/cache.py`: process-wide cache areas, cleared by fnmatch patterns such as `*(plugins)*`."""

from __future__ import annotations

import fnmatch
import threading
from typing import Any

_lock = threading.RLock()
_cache: dict[str, dict[Any, Any]] = {}
_disabled_areas: set[str] = set()

_MAGIC = "*?["


def toggle_area(area: str, enabled: bool) -> None:
    if enabled:
        _disabled_areas.discard(area)
    else:
        _disabled_areas.add(area)


def has(area: str, key: Any) -> bool:
    if area in _disabled_areas:
        return False
    with _lock:
        return key in _cache.get(area, {})


def add(area: str, key: Any, data: Any) -> None:
    if area in _disabled_areas:
        return
    with _lock:
        _cache.setdefault(area, {})[key] = data


def get(area: str, key: Any, default: Any = None) -> Any:
    if area in _disabled_areas:
        return default
    with _lock:
        return _cache.get(area, {}).get(key, default)


def remove(area: str, key: Any) -> None:
    with _lock:
        _cache.get(area, {}).pop(key, None)


def clear(area: str) -> None:
    """Drop one area, or every area matching a glob pattern."""
    with _lock:
        if any(ch in area for ch in _MAGIC):
            for name in [k for k in _cache if fnmatch.fnmatch(k, area)]:
                _cache.pop(name, None)
        else:
            _cache.pop(area, None)


def clear_all() -> None:
    with _lock:
        _cache.clear()


def determine_cache_key(agent: Any, *additional: Any) -> tuple[Any, ...]:
    """Key by (profile, project) as A0 does, so caches differ per agent scope."""
    if agent:
        profile = agent.config.profile or "none"
        project = agent.context.get_data("project") or "none"
        return (profile, project, *additional)
    return ("none", "none", *additional)
