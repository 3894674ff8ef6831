"""Paths and file access relative to the A0 root (A0 `helpers/files.py`).

The root is found from this file's own location (`<root>/helpers/files.py`), never from the cwd,
as A0 does with `_base_dir`.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from typing import Any

import yaml

AGENTS_DIR = "agents"
PLUGINS_DIR = "plugins"
PROJECTS_DIR = "projects"
EXTENSIONS_DIR = "extensions"
USER_DIR = "usr"
TEMP_DIR = "tmp"
API_DIR = "api"

_base_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get_base_dir() -> str:
    """The A0 root this stand-in copy lives in."""
    return _base_dir


def get_abs_path(*relative_paths: str) -> str:
    """Join onto the root; an absolute part resets the join, as `os.path.join` (and A0) does."""
    return os.path.join(_base_dir, *relative_paths)


def deabsolute_path(path: str) -> str:
    return os.path.relpath(path, _base_dir)


def exists(*relative_paths: str) -> bool:
    return os.path.exists(get_abs_path(*relative_paths))


def is_file(*relative_paths: str) -> bool:
    return os.path.isfile(get_abs_path(*relative_paths))


def is_dir(*relative_paths: str) -> bool:
    return os.path.isdir(get_abs_path(*relative_paths))


def is_in_dir(path: str, directory: str) -> bool:
    abs_path = os.path.abspath(path)
    abs_dir = os.path.abspath(directory)
    return os.path.commonpath([abs_path, abs_dir]) == abs_dir


def basename(path: str, suffix: str | None = None) -> str:
    name = os.path.basename(path)
    return name.removesuffix(suffix) if suffix else name


def dirname(path: str) -> str:
    return os.path.dirname(path)


def read_file(relative_path: str, encoding: str = "utf-8") -> str:
    with open(get_abs_path(relative_path), encoding=encoding) as f:
        return f.read()


def read_file_yaml(relative_path: str) -> Any:
    return yaml.safe_load(read_file(relative_path))


def write_file(relative_path: str, content: str, encoding: str = "utf-8") -> None:
    abs_path = get_abs_path(relative_path)
    os.makedirs(os.path.dirname(abs_path), exist_ok=True)
    with open(abs_path, "w", encoding=encoding) as f:
        f.write(content)


def delete_file(relative_path: str) -> None:
    abs_path = get_abs_path(relative_path)
    if os.path.exists(abs_path):
        os.remove(abs_path)


def delete_dir(relative_path: str) -> None:
    """Delete a folder. Stand-in safety deviation: a symlinked folder (the plugin under test is
    linked into `usr/plugins/`) is unlinked, never followed, so tests cannot delete the repo."""
    abs_path = get_abs_path(relative_path).rstrip("/")
    if os.path.islink(abs_path):
        os.unlink(abs_path)
    elif os.path.exists(abs_path):
        shutil.rmtree(abs_path, ignore_errors=True)


def find_existing_paths_by_pattern(pattern: str) -> list[str]:
    if not pattern:
        return []
    return sorted(glob.glob(get_abs_path(pattern), recursive=True))


def get_unique_filenames_in_dirs(dir_paths: list[str], pattern: str = "*") -> list[str]:
    """Files matching `pattern` in `dir_paths`, the first of each file name winning (priority by
    order), sorted by file name."""
    seen: set[str] = set()
    result = []
    for dir_path in dir_paths:
        for file_path in glob.glob(os.path.join(get_abs_path(dir_path), pattern)):
            name = os.path.basename(file_path)
            if name not in seen and os.path.isfile(file_path):
                seen.add(name)
                result.append(get_abs_path(file_path))
    return sorted(result, key=os.path.basename)


def get_subdirectories(relative_path: str) -> list[str]:
    abs_path = get_abs_path(relative_path)
    if not os.path.isdir(abs_path):
        return []
    return sorted(d for d in os.listdir(abs_path) if os.path.isdir(os.path.join(abs_path, d)))


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")


def _find_in_dirs(file: str, directories: list[str]) -> str:
    for directory in directories:
        candidate = os.path.join(directory, file)
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"File '{file}' not found in the following directories: {directories}")


def _fill(template: str, kwargs: dict[str, Any]) -> str:
    def repl(match: re.Match[str]) -> str:
        key = match.group(1)
        return str(kwargs[key]) if key in kwargs else match.group(0)

    return _PLACEHOLDER.sub(repl, template)


def read_prompt_file(file: str, _directories: list[str] | None = None, **kwargs: Any) -> str:
    """First `file` found in `_directories` (A0 prompt lookup), with `{{name}}` placeholders filled."""
    path = _find_in_dirs(file, [*(_directories or []), get_abs_path("prompts")])
    return _fill(read_file(path), {k: v for k, v in kwargs.items() if not k.startswith("_")})


def parse_file(file: str, _directories: list[str] | None = None, **kwargs: Any) -> str:
    """A0 `files.parse_file`; the stand-in's prompts are plain text, so it equals `read_prompt_file`."""
    return read_prompt_file(file, _directories=_directories, **kwargs)


def is_full_json_template(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith("~~~json") or stripped.startswith("```json")


def remove_code_fences(text: str) -> str:
    return re.sub(r"(```|~~~)(.*?\n)(.*?)(\1)", r"\3", text, flags=re.DOTALL)
