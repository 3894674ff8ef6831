"""A0 `helpers/dirty_json`, reduced: strict JSON after stripping code fences, else the first
JSON array/object found in the text (utility-model answers in the stand-in are JSON)."""

from __future__ import annotations

import json
import re
from typing import Any


class DirtyJson:
    @staticmethod
    def parse_string(text: str) -> Any:
        cleaned = re.sub(r"^\s*(```|~~~)\w*\s*|\s*(```|~~~)\s*$", "", text)
        try:
            return json.loads(cleaned)
        except ValueError:
            match = re.search(r"(\[.*\]|\{.*\})", cleaned, flags=re.DOTALL)
            if not match:
                raise
            return json.loads(match.group(1))


def try_parse(text: str) -> Any:
    try:
        return DirtyJson.parse_string(text)
    except ValueError:
        return None


def stringify(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)
