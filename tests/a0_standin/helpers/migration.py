"""A0 `helpers/migration.startup_migration`: the `startup_migration` extension point (sync, agent=None)."""

from __future__ import annotations

from helpers import extension


def startup_migration() -> None:
    extension.call_extensions_sync("startup_migration", None)
