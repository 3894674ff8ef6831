"""The settings panel's files against the plugin's own sources, without a browser: every setting of
``default_config.yaml`` is bound in ``config.html``, and the limits the browser checks
(``webui/settings-schema.json``) are exactly ``core/config.py``'s."""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from typing import Any

import yaml

from support.a0_layout import REPO_ROOT
from usr.plugins.a0_reranker.core.config import API_MODES, HEDGE_MODES, NUMERIC_RANGES, RerankerConfig, setting_key

WEBUI = REPO_ROOT / "webui"
CONFIG_HTML = (WEBUI / "config.html").read_text(encoding="utf-8")
SCHEMA = json.loads((WEBUI / "settings-schema.json").read_text(encoding="utf-8"))
DEFAULTS = yaml.safe_load((REPO_ROOT / "default_config.yaml").read_text(encoding="utf-8"))
BOUND = re.findall(r'x-model(?:\.[a-z]+)*="config\.([a-z0-9_]+)"', CONFIG_HTML)


class Fields(HTMLParser):
    """Each ``.field[data-setting]``: its title, help line and controls."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, dict[str, Any]] = {}
        self.options: list[str] = []
        self._current: dict[str, Any] | None = None
        self._capture: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if "field" in classes and attributes.get("data-setting"):
            self._current = {"title": "", "help": "", "controls": []}
            self.fields[str(attributes["data-setting"])] = self._current
        elif self._current is not None and ("field-title" in classes or "field-description" in classes):
            self._capture = "title" if "field-title" in classes else "help"
        elif self._current is not None and tag in ("input", "select", "textarea", "button"):
            self._current["controls"].append((tag, attributes))
        if tag == "option":
            self.options.append(str(attributes.get("value")))

    def handle_endtag(self, tag: str) -> None:
        self._capture = None if tag == "div" else self._capture

    def handle_data(self, data: str) -> None:
        if self._current is not None and self._capture:
            self._current[self._capture] += data.strip()


def parsed() -> Fields:
    fields = Fields()
    fields.feed(CONFIG_HTML)
    return fields


def test_config_html_binds_every_setting_of_default_config_once() -> None:
    assert sorted(BOUND) == sorted(DEFAULTS), "config.html must bind each default_config.yaml key exactly once"
    assert set(DEFAULTS) == set(settings_keys_of_the_model())


def test_each_setting_has_a_title_and_a_line_of_help() -> None:
    fields = parsed().fields
    assert set(DEFAULTS) <= set(fields)
    for key in DEFAULTS:
        assert fields[key]["title"], key
        assert 40 <= len(fields[key]["help"]) <= 200, (key, fields[key]["help"])


def test_api_key_is_a_password_field_and_the_api_choices_are_the_modes() -> None:
    fields = parsed()
    [(tag, attributes)] = fields.fields["rerank_api_key"]["controls"]
    assert tag == "input" and attributes["type"] == "password"
    assert fields.options == list(API_MODES) + list(HEDGE_MODES)  # the two selects, in panel order


def test_schema_limits_are_core_configs() -> None:
    settings = SCHEMA["settings"]
    assert list(settings) == settings_keys_of_the_model()
    numbers = {key: (rule["min"], rule["max"]) for key, rule in settings.items() if "min" in rule}
    assert numbers == {setting_key(name): limits for name, limits in NUMERIC_RANGES.items()}
    for f in dataclasses.fields(RerankerConfig):
        rule = settings[setting_key(f.name)]
        expected = {"bool": "bool", "int": "integer", "float": "number"}.get(str(f.type), "text")
        if f.name == "api":
            assert rule == {"type": "choice", "choices": list(API_MODES)}
        elif f.name == "hedge":
            assert rule == {"type": "choice", "choices": list(HEDGE_MODES)}
        elif f.name == "endpoint":
            assert rule == {"type": "url"}
        else:
            assert rule["type"] == expected, f.name


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
