"""The settings panel's fields as drawn in headless Chromium from ``webui/settings-schema.json``: each
entry's words and control, the limits and options from the same entry, a saved choice shown as
chosen, and a clear message when the schema or the defaults cannot be loaded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.a0_layout import REPO_ROOT

from .conftest import A0Root, Panel, goto_host
from .test_settings_panel import expect, open_panel

pytestmark = pytest.mark.browser

SCHEMA = json.loads((REPO_ROOT / "webui" / "settings-schema.json").read_text(encoding="utf-8"))
TAGS = {"toggle": ("INPUT", "checkbox"), "select": ("SELECT", "select-one"), "text": ("INPUT", "text"),
        "password": ("INPUT", "password"), "number": ("INPUT", "number"), "textarea": ("TEXTAREA", "textarea")}
DRAWN = """() => [...document.querySelectorAll('.a0r-panel .field[data-setting^="rerank_"]')].map((field) => {
  const control = field.querySelector('.field-control').querySelector('input, select, textarea');
  return {
    key: field.dataset.setting,
    section: field.closest('[data-section]').dataset.section,
    title: field.querySelector('.field-title').textContent,
    description: field.querySelector('.field-description').textContent,
    tag: control.tagName, type: control.type,
    min: control.getAttribute('min'), max: control.getAttribute('max'), step: control.getAttribute('step'),
    placeholder: control.getAttribute('placeholder'),
    options: [...control.querySelectorAll('option')].map((option) => [option.value, option.textContent]),
  };
})"""


def test_each_field_is_drawn_from_its_schema_entry(panel: Panel) -> None:
    open_panel(panel)
    drawn = {field["key"]: field for field in panel.page.evaluate(DRAWN)}
    assert list(drawn) == list(SCHEMA["settings"])
    for key, entry in SCHEMA["settings"].items():
        field = drawn[key]
        assert (field["section"], field["title"], field["description"]) == (
            entry["section"], entry["title"], entry["description"]), key
        assert (field["tag"], field["type"]) == TAGS[entry["control"]], key
        assert field["placeholder"] == entry.get("placeholder"), key
        assert field["options"] == [list(item) for item in entry.get("labels", {}).items()], key
        if entry["control"] == "number":
            assert (float(field["min"]), float(field["max"])) == (entry["min"], entry["max"]), key
            assert field["step"] == ("1" if entry["type"] == "integer" else "any"), key
    descriptions = panel.page.locator(".a0r-section > .section-description")
    assert descriptions.all_inner_texts()[:2] == [s["description"] for s in SCHEMA["sections"] if "description" in s]


def test_saved_choices_are_shown_chosen(panel: Panel, a0_root: A0Root) -> None:
    a0_root.save_global_config({"rerank_api": "qwen3_score", "rerank_hedge": "off", "rerank_apply": False})
    open_panel(panel)
    assert panel.control("rerank_api").input_value() == "qwen3_score"
    assert panel.control("rerank_hedge").input_value() == "off"
    assert not panel.control("rerank_apply").is_checked() and panel.control("rerank_enabled").is_checked()
    panel.control("rerank_hedge").select_option("on")
    assert panel.form_config()["rerank_hedge"] == "on"


def test_a_schema_that_does_not_load_is_named_and_no_field_is_drawn(panel: Panel) -> None:
    panel.page.route("**/webui/settings-schema.json", lambda route: route.fulfill(status=404, body="gone"))
    opened = open_without_fields(panel)
    expect(opened.locator(".a0r-load-error")).to_contain_text("settings-schema.json: HTTP 404")
    expect(opened.locator(".field")).to_have_count(0)
    expect(panel.stat("mode")).to_be_visible()  # the live status still shows
    assert panel.toasts()[-1]["type"] == "error"
    panel.errors[:] = [error for error in panel.errors if "404" not in error]  # the browser logs the 404


def test_defaults_that_do_not_load_leave_the_fields_drawn_and_test_refused(panel: Panel) -> None:
    def no_defaults(route: Any) -> None:
        if (route.request.post_data_json or {}).get("action") == "get_default_config":
            route.fulfill(json={"ok": False, "error": "defaults unavailable"})
        else:
            route.continue_()

    panel.page.route("**/api/plugins", no_defaults)
    opened = open_without_fields(panel)
    expect(opened.locator(".a0r-load-error")).to_contain_text("defaults unavailable")
    expect(opened.locator('.field[data-setting^="rerank_"]')).to_have_count(len(SCHEMA["settings"]))
    panel.test_button().click()
    expect(panel.test_result()).to_contain_text("The test could not run")
    assert panel.host.plugin_calls("test_connection") == []


def open_without_fields(panel: Panel) -> Any:
    goto_host(panel)
    panel.page.evaluate("() => window.openPluginSettings('a0_reranker')")
    opened = panel.page.locator(".a0r-panel")
    expect(opened.locator(".a0r-load-error")).to_be_visible()
    return opened
