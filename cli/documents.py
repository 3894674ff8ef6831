"""Documents for ``rerank``: from the command line, a file, or stdin; one per line or JSON Lines.

JSON Lines: each line is a JSON string or an object with a ``"text"`` string. With ``--format auto``
a file is read as JSON Lines when its first non-empty line is a JSON string or object, else as plain
lines. Empty lines are skipped in both formats. Text that is not valid Unicode (a lone surrogate,
from undecodable bytes or a ``"\ud800"`` escape) is refused with where it is.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .errors import CliError

FORMATS = ("auto", "lines", "jsonl")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def read_documents(arguments: Sequence[str], path: str | None, fmt: str, stdin: TextIO | None = None) -> list[str]:
    """The documents to rank, in input order; a user error when there are none or the file is unreadable."""
    documents = [checked_text(text, f"DOC {number}") for number, text in enumerate(arguments, 1)]
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
        return [checked_text(line, f"{source} line {number}") for number, line in lines]
    return [checked_text(_json_document(line, number, source), f"{source} line {number}") for number, line in lines]


def checked_text(text: str, where: str) -> str:
    """``text``, unless it is not valid Unicode: then a user error that says where."""
    bad = _LONE_SURROGATE.search(text)
    if bad is not None:
        raise CliError(f"{where}: not valid Unicode text at character {bad.start() + 1} (undecodable bytes, "
                       f"or half of a surrogate pair such as \\ud800)")
    return text


def _looks_like_json(line: str) -> bool:
    if not line.lstrip().startswith(("{", '"')):
        return False
    try:
        return isinstance(json.loads(line), str | dict)
    except (ValueError, RecursionError):
        return False


def _json_document(line: str, number: int, source: str) -> str:
    try:
        value: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CliError(f"{source} line {number}: not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError):  # an integer too long to read, nesting too deep to follow
        raise CliError(f"{source} line {number}: JSON this reader cannot take (too deep or too long)") from None
    if isinstance(value, dict):
        value = value.get("text")
    if not isinstance(value, str):
        raise CliError(f'{source} line {number}: expected a JSON string or an object with a "text" string')
    return value


def _read_text(path: str, stdin: TextIO | None) -> str:
    if path == "-" and (stdin is None or stdin.closed):
        raise CliError("cannot read stdin: it is closed (pipe the documents in, or use --file PATH)")
    try:
        return stdin.read() if stdin is not None and path == "-" else Path(path).read_text(encoding="utf-8")
    except ValueError as exc:  # UnicodeDecodeError, or a stream closed under us
        reason = "it is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "it is closed"
        raise CliError(f"cannot read {_name(path)}: {reason}") from None
    except OSError as exc:
        raise CliError(f"cannot read {_name(path)}: {exc.strerror or exc}") from None


def _name(path: str) -> str:
    return "stdin" if path == "-" else path
