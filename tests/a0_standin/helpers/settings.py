"""A0 `helpers/settings.py`, reduced to what plugins touch: `get_default_value` (the `A0_SET_` env
override used by `_apply_defaults_from_env`) and a minimal `get_settings()`."""

from __future__ import annotations

import json
import os
from typing import Any, TypeVar

from helpers.print_style import PrintStyle

T = TypeVar("T")

_settings: dict[str, Any] = {
    "agent_profile": "agent0",
    "agent_knowledge_subdir": "custom",
    "mcp_servers": "",
    "mcp_server_token": "standin-token",
}


def get_default_value(name: str, value: T) -> T:
    """`A0_SET_<name>` (then the upper-case name) from the environment, coerced to `value`'s type."""
    env_value = os.environ.get(f"A0_SET_{name}", os.environ.get(f"A0_SET_{name.upper()}"))
    if env_value is None:
        return value
    try:
        if isinstance(value, bool):
            return env_value.strip().lower() in ("true", "1", "yes", "on")  # type: ignore[return-value]
        if isinstance(value, dict):
            return json.loads(env_value.strip())  # type: ignore[no-any-return]
        if isinstance(value, str):
            return str(env_value).strip()  # type: ignore[return-value]
        return type(value)(env_value.strip())  # type: ignore[call-arg]
    except (ValueError, TypeError) as e:
        PrintStyle.warning(f"Invalid value for A0_SET_{name}='{env_value}': {e}. Using default: {value}")
        return value


def get_settings() -> dict[str, Any]:
    return dict(_settings)


def set_settings(**values: Any) -> None:
    """Stand-in only: change a setting (e.g. `mcp_server_token`) for a test."""
    _settings.update(values)
