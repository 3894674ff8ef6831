"""The settings panel's files against the plugin's own sources, without a browser: every setting of
``default_config.yaml`` has one entry in ``webui/settings-schema.json``, which ``config.html`` draws
with the template of the entry's control (the types, limits and choices the browser checks are
``core/config.py``'s: ``tests/test_settings_sources.py``)."""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from typing import Any

import yaml

from support.a0_layout import REPO_ROOT
from usr.plugins.a0_reranker.core.config import API_MODES, HEDGE_MODES, RerankerConfig, setting_key

WEBUI = REPO_ROOT / "webui"
CONFIG_HTML = (WEBUI / "config.html").read_text(encoding="utf-8")
SCHEMA = json.loads((WEBUI / "settings-schema.json").read_text(encoding="utf-8"))
SETTINGS: dict[str, dict[str, Any]] = SCHEMA["settings"]
DEFAULTS = yaml.safe_load((REPO_ROOT / "default_config.yaml").read_text(encoding="utf-8"))
SECTIONS = ["connection", "behaviour", "quality", "batching", "reliability"]  # the endpoint first
FOLDED = {"quality", "batching", "reliability"}  # what a newcomer need not touch, drawn closed
RULE_KEYS = {"type", "min", "max", "choices"}  # what core/config.py says
SHOWN_KEYS = {"section", "control", "title", "description", "placeholder", "labels"}  # how the panel says it
REQUIRED_KEYS = {"type", "section", "control", "title", "description"}
CONTROLS_OF_TYPE = {"bool": {"toggle"}, "choice": {"select"}, "integer": {"number"}, "number": {"number"},
                    "url": {"textarea"}, "text": {"text", "password", "textarea"}, "line": {"text", "password"}}
FIELD_TEMPLATE = re.compile(r"field\.control === '([a-z]+)'")
BINDING = re.compile(r"x-model(?:\.[a-z]+)*")


class ControlTemplates(HTMLParser):
    """Each ``<template x-if="field.control === '...'">`` of ``config.html``: the controls it draws and
    their attributes, and every ``x-model`` binding of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.templates: dict[str, list[tuple[str, dict[str, str | None]]]] = {}
        self.bindings: list[str] = []
        self._kind: str | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.bindings += [str(value) for name, value in attrs if BINDING.fullmatch(name)]
        if tag == "template":
            self._depth += self._kind is not None
            found = FIELD_TEMPLATE.fullmatch(attributes.get("x-if") or "")
            if self._kind is None and found:
                self._kind = found.group(1)
                self.templates[self._kind] = []
        elif self._kind is not None and tag in ("input", "select", "textarea", "button"):
            self.templates[self._kind].append((tag, attributes))

    def handle_endtag(self, tag: str) -> None:
        if tag == "template" and self._kind is not None:
            if self._depth == 0:
                self._kind = None
            self._depth = max(0, self._depth - 1)


def parsed() -> ControlTemplates:
    templates = ControlTemplates()
    templates.feed(CONFIG_HTML)
    return templates


def test_every_setting_of_default_config_has_one_entry_and_every_entry_a_setting() -> None:
    assert sorted(set(DEFAULTS) - set(SETTINGS)) == [], "settings of default_config.yaml with no schema entry"
    assert sorted(set(SETTINGS) - set(DEFAULTS)) == [], "schema entries with no setting in default_config.yaml"
    assert set(DEFAULTS) == set(settings_keys_of_the_model())


def test_config_html_binds_every_setting_once_through_its_controls_template() -> None:
    """One template per control kind, each binding ``config[field.key]`` once: drawn once per entry,
    that is one binding per setting. No field is written out by hand."""
    templates = parsed()
    assert sorted(templates.templates) == sorted({"toggle", "select", "text", "password", "number", "textarea"})
    assert templates.bindings == ["config[field.key]"] * len(templates.templates)
    for kind, controls in templates.templates.items():
        bound = [attributes for _tag, attributes in controls if any(BINDING.fullmatch(n) for n in attributes)]
        assert len(bound) == 1, kind
    assert {entry["control"] for entry in SETTINGS.values()} <= set(templates.templates)
    assert not re.search(r"data-setting=\"rerank_|config\.rerank_|field-title\">(?!Test connection)", CONFIG_HTML)


def test_each_entrys_texts_meet_the_length_rules() -> None:
    for key, entry in SETTINGS.items():
        assert 3 <= len(entry["title"]) <= 40, (key, entry["title"])
        assert 40 <= len(entry["description"]) <= 200, (key, entry["description"])
        assert entry["description"] == " ".join(entry["description"].split()), key
    for section in SCHEMA["sections"]:
        assert 3 <= len(section["title"]) <= 40, section
        assert 40 <= len(section.get("description", "x" * 40)) <= 200, section
    instruction = SETTINGS["rerank_instruction"]["description"]
    assert "used in qwen3_score mode" in instruction and "vLLM's /rerank" in instruction


def test_each_entry_is_in_a_section_in_the_panels_order_with_a_control_of_its_type() -> None:
    assert [section["key"] for section in SCHEMA["sections"]] == SECTIONS
    assert {section["key"] for section in SCHEMA["sections"] if section.get("folded")} == FOLDED
    assert next(iter(SETTINGS)) == "rerank_endpoint"  # the one field a newcomer must fill in comes first
    order = [SECTIONS.index(entry["section"]) for entry in SETTINGS.values()]
    assert order == sorted(order), "a section's settings follow one another, sections in the panel's order"
    for key, entry in SETTINGS.items():
        assert REQUIRED_KEYS <= set(entry) <= RULE_KEYS | SHOWN_KEYS, (key, sorted(entry))
        assert entry["control"] in CONTROLS_OF_TYPE[entry["type"]], key
        assert "placeholder" not in entry or entry["control"] in ("text", "password", "textarea"), key
        assert ("labels" in entry) == (entry["type"] == "choice"), key


def test_api_key_is_a_password_field_and_the_api_choices_are_the_modes() -> None:
    assert SETTINGS["rerank_api_key"]["control"] == "password"
    assert [entry["control"] for entry in SETTINGS.values()].count("password") == 1
    [(tag, attributes)] = parsed().templates["password"]
    assert tag == "input" and attributes["type"] == "password" and attributes["autocomplete"] == "new-password"
    selects = [entry for entry in SETTINGS.values() if entry["control"] == "select"]
    options = [value for entry in selects for value in entry["labels"]]
    assert options == list(API_MODES) + list(HEDGE_MODES)  # the two selects, in panel order
    for entry in selects:
        assert list(entry["labels"]) == entry["choices"] and all(entry["labels"].values())


def test_the_webui_copies_no_default_value() -> None:
    """Defaults come from Agent Zero's get_default_config, so no file of the panel repeats one."""
    instruction = DEFAULTS["rerank_instruction"]
    for path in WEBUI.glob("*.*"):
        if path.suffix not in (".html", ".js", ".json", ".css"):
            continue
        text = path.read_text(encoding="utf-8")
        assert instruction not in text, path.name
        assert not re.search(r"\b(4096|8000)\b", text), path.name


def settings_keys_of_the_model() -> list[str]:
    return [setting_key(f.name) for f in dataclasses.fields(RerankerConfig)]
