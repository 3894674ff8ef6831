"""Which processes are alive, and how they are related, read from ``/proc`` (Linux): what the signal
tests check a command left behind."""

from __future__ import annotations

import select
from collections.abc import Callable
from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None once it ended."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):  # it ended meanwhile
        return None


def parent_of(pid: int) -> int | None:
    fields = stat_fields(pid)
    return None if fields is None else int(fields[1])


def group_of(pid: int) -> int | None:
    """Its process group, or None once it ended or is a zombie."""
    fields = stat_fields(pid)
    return None if fields is None or fields[0] in ("Z", "X") else int(fields[2])


def processes_where(related: Callable[[int], bool]) -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and related(int(entry.name))]


def children_of(pid: int) -> list[int]:
    return processes_where(lambda other: parent_of(other) == pid)


def members_of_group(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that have not ended."""
    return processes_where(lambda other: group_of(other) == pgid)


def ended(pidfds: list[int], within_s: float) -> bool:
    """Whether every process behind ``pidfds`` has ended (a pidfd turns readable then), waiting at most
    ``within_s`` for the last of them: one that has closed its pipes may still be tearing down."""
    remaining = list(pidfds)
    while remaining:
        ready, _, _ = select.select(remaining, [], [], within_s)
        if not ready:
            return False
        remaining = [fd for fd in remaining if fd not in ready]
    return True
