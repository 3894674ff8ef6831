"""One source for the settings: ``core/config.py``.

``RerankerConfig``'s fields are the settings (field ``x`` is ``rerank_x``), in their order, with their
defaults and types; ``NUMERIC_RANGES`` holds every number's inclusive range, ``API_MODES`` and
``HEDGE_MODES`` the two choices. Three files restate parts of it for their readers and are checked
against it here, so a change to one that the source does not make fails:

- ``default_config.yaml`` (what A0 loads and a user edits): every key, in the source's order, with the
  source's default as a value of the field's own type; the comment above a choice names every choice.
- docs/settings.md's settings table: every key, in the source's order, with the source's default; a choice
  setting's row names every choice.
- ``webui/settings-schema.json`` (what the panel draws and checks before sending): every key, each with
  exactly the source's type, range and choices (its order is the panel's, its words are its own).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
import yaml

from support.a0_layout import REPO_ROOT
from usr.plugins.a0_reranker.core.config import (
    API_MODES,
    HEDGE_MODES,
    NUMERIC_RANGES,
    SINGLE_LINE_FIELDS,
    RerankerConfig,
    setting_key,
)

FIELDS = {setting_key(f.name): f for f in dataclasses.fields(RerankerConfig)}
DEFAULTS = RerankerConfig().to_settings()
CHOICES = {"rerank_api": API_MODES, "rerank_hedge": HEDGE_MODES}
RANGES = {setting_key(name): limits for name, limits in NUMERIC_RANGES.items()}
YAML_TEXT = (REPO_ROOT / "default_config.yaml").read_text(encoding="utf-8")
SETTINGS_PAGE = (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
SCHEMA = json.loads((REPO_ROOT / "webui" / "settings-schema.json").read_text(encoding="utf-8"))["settings"]


def kind(key: str) -> str:
    """The source's type of a setting, in the schema's words."""
    if key in CHOICES:
        return "choice"
    if key == "rerank_endpoint":
        return "url"
    if key in {setting_key(name) for name in SINGLE_LINE_FIELDS}:
        return "line"
    return {"bool": "bool", "int": "integer", "float": "number"}.get(str(FIELDS[key].type), "text")


def of_its_type(key: str, value: Any) -> bool:
    """Whether ``value`` is written as the setting's type: a whole number for an integer, no bool for a number."""
    wanted = {"bool": (bool,), "integer": (int,), "number": (int, float)}.get(kind(key), (str,))
    return isinstance(value, wanted) and (kind(key) == "bool" or not isinstance(value, bool))


# --- the source agrees with itself ----------------------------------------------------------------------------


def test_every_number_has_a_range_and_every_default_is_allowed() -> None:
    numbers = {key for key in FIELDS if kind(key) in ("integer", "number")}
    assert set(RANGES) == numbers
    for key, (low, high) in RANGES.items():
        assert low <= DEFAULTS[key] <= high, key
    for key, choices in CHOICES.items():
        assert DEFAULTS[key] in choices, key


# --- default_config.yaml ----------------------------------------------------------------------------------


def test_default_config_yaml_has_the_sources_keys_defaults_and_types() -> None:
    written = yaml.safe_load(YAML_TEXT)
    assert list(written) == list(FIELDS)
    wrong = {key: value for key, value in written.items() if value != DEFAULTS[key] or not of_its_type(key, value)}
    assert wrong == {}, f"default_config.yaml disagrees with core/config.py: {wrong}"


@pytest.mark.parametrize("key", sorted(CHOICES))
def test_default_config_yaml_names_every_choice(key: str) -> None:
    comment = comment_above(YAML_TEXT, key)
    assert [choice for choice in CHOICES[key] if not re.search(rf"\b{choice}\b", comment)] == [], comment


def comment_above(text: str, key: str) -> str:
    lines = text[: text.index(f"\n{key}:")].splitlines()
    block = []
    for line in reversed(lines):
        if not line.startswith("#") or line.startswith("# ---"):
            break
        block.append(line)
    return "\n".join(reversed(block))


# --- docs/settings.md -----------------------------------------------------------------------------------------------


def settings_rows() -> dict[str, tuple[str, str]]:
    """``{key: (default cell, what-it-does cell)}`` of the settings table."""
    rows = re.findall(r"^\| `(rerank_[a-z_]+)` \| (.+?) \| (.+) \|$", SETTINGS_PAGE, flags=re.MULTILINE)
    return {key: (default, text) for key, default, text in rows}


def shown(value: Any) -> str:
    """A default as the table writes it."""
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if value == "":
        return '`""`'
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


def test_the_settings_table_has_the_sources_keys_and_defaults() -> None:
    rows = settings_rows()
    assert list(rows) == list(FIELDS)
    wrong = {key: cell for key, (cell, _) in rows.items() if cell != shown(DEFAULTS[key])}
    assert wrong == {}, f"docs/settings.md's defaults disagree with core/config.py: {wrong}"


@pytest.mark.parametrize("key", sorted(CHOICES))
def test_the_settings_table_names_every_choice(key: str) -> None:
    default, text = settings_rows()[key]
    assert [choice for choice in CHOICES[key] if f"`{choice}`" not in default + text] == [], text


# --- webui/settings-schema.json ----------------------------------------------------------------------------


def rule_of_the_source(key: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"type": kind(key)}
    if key in RANGES:
        rule["min"], rule["max"] = RANGES[key]
    if key in CHOICES:
        rule["choices"] = list(CHOICES[key])
    return rule


def test_the_panels_schema_has_the_sources_keys_types_ranges_and_choices() -> None:
    assert set(SCHEMA) == set(FIELDS)
    rules = {key: {name: entry[name] for name in ("type", "min", "max", "choices") if name in entry}
             for key, entry in SCHEMA.items()}
    wrong = {key: rule for key, rule in rules.items() if rule != rule_of_the_source(key)}
    assert wrong == {}, f"settings-schema.json disagrees with core/config.py: {wrong}"
    for key, entry in SCHEMA.items():
        if "labels" in entry:  # a select's words, one per choice
            assert list(entry["labels"]) == list(CHOICES[key]), key
