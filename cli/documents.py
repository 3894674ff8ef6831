"""Documents for ``rerank``: from the command line, a file, or stdin; one per line or JSON Lines.

JSON Lines: each line is a JSON string or an object with a ``"text"`` string. With ``--format auto``
a file is read as JSON Lines when its first non-empty line is a JSON string or object, else as plain
lines. Empty lines are skipped in both formats.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .errors import CliError

FORMATS = ("auto", "lines", "jsonl")


def read_documents(arguments: Sequence[str], path: str | None, fmt: str, stdin: TextIO | None = None) -> list[str]:
    """The documents to rank, in input order; a user error when there are none or the file is unreadable."""
    documents = list(arguments)
    if path is not None:
        documents += parse_documents(_read_text(path, stdin or sys.stdin), fmt, source=_name(path))
    if not documents:
        raise CliError("no documents to rank: give them after the query, or use --file PATH (--file - for stdin)")
    return documents


def parse_documents(text: str, fmt: str, *, source: str) -> list[str]:
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if fmt == "auto":
        fmt = "jsonl" if lines and _looks_like_json(lines[0][1]) else "lines"
    if fmt == "lines":
        return [line for _, line in lines]
    return [_json_document(line, number, source) for number, line in lines]


def _looks_like_json(line: str) -> bool:
    if not line.lstrip().startswith(("{", '"')):
        return False
    try:
        return isinstance(json.loads(line), str | dict)
    except ValueError:
        return False


def _json_document(line: str, number: int, source: str) -> str:
    try:
        value: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CliError(f"{source} line {number}: not valid JSON ({exc.msg})") from None
    if isinstance(value, dict):
        value = value.get("text")
    if not isinstance(value, str):
        raise CliError(f'{source} line {number}: expected a JSON string or an object with a "text" string')
    return value


def _read_text(path: str, stdin: TextIO) -> str:
    try:
        return stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {_name(path)}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CliError(f"cannot read {_name(path)}: it is not UTF-8 text") from None


def _name(path: str) -> str:
    return "stdin" if path == "-" else path
