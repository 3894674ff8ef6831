"""A0 `initialize.py` seams (each `@extensible`): `initialize_agent`, `initialize_migration`."""

from __future__ import annotations

from typing import Any

from agent import AgentConfig
from helpers.extension import extensible

from helpers import settings


@extensible
def initialize_agent(override_settings: dict[str, Any] | None = None) -> AgentConfig:
    current = {**settings.get_settings(), **(override_settings or {})}
    return AgentConfig(
        profile=current["agent_profile"],
        knowledge_subdirs=[current["agent_knowledge_subdir"], "default"],
        mcp_servers=current["mcp_servers"],
    )


@extensible
def initialize_migration() -> None:
    """Runs `helpers.migration.startup_migration`, i.e. the sync `startup_migration` extensions."""
    from helpers import migration

    migration.startup_migration()
