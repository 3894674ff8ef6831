"""Plain-text rendering shared by the commands: ASCII apart from the user's own text, so it prints on any
terminal; bold only on a terminal and never when ``NO_COLOR`` is set."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

MIN_WIDTH, MAX_WIDTH = 60, 120


def terminal_width() -> int:
    return max(MIN_WIDTH, min(MAX_WIDTH, shutil.get_terminal_size((100, 24)).columns))


def bold(text: str) -> str:
    if os.environ.get("NO_COLOR") or not getattr(sys.stdout, "isatty", lambda: False)():
        return text
    return f"\033[1m{text}\033[0m"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str, width: int | None = None) -> list[str]:
    """Aligned columns (``align``: one "<" or ">" per column); the last one on one line, cut to ``width`` with "..."."""
    cells = [list(headers), *[list(row) for row in rows]]
    sizes = [max(len(row[i]) for row in cells) for i in range(len(headers) - 1)]
    lines = []
    for row in cells:
        head = "  ".join(f"{cell:{a}{size}}" for cell, a, size in zip(row, align, sizes, strict=False))
        room = max((width - len(head) - 2) if width else len(row[-1]), 12)
        last = " ".join(row[-1].split())
        if len(last) > room:
            last = last[: room - 3].rstrip() + "..."
        lines.append(f"{head}  {last}".rstrip())
    return lines


def number(value: float | None, spec: str = ".3g", unit: str = "") -> str:
    """A value as people read it (a score: 3 significant digits), with its unit; "-" when missing."""
    return "-" if value is None else f"{value:{spec}}{unit}"
