"""A0 `helpers/yaml.py`: YAML load/dump through PyYAML."""

from __future__ import annotations

from typing import Any

import yaml as _yaml


def loads(text: str) -> Any:
    return _yaml.safe_load(text)


def dumps(data: Any) -> str:
    return _yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
