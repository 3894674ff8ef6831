"""The settings panel's fields as drawn in headless Chromium from ``webui/settings-schema.json``: each
entry's words and control, the limits and options from the same entry, a saved choice shown as
chosen, and a clear message when the schema or the defaults cannot be loaded."""

from __future__ import annotations

import json

import pytest

from support.a0_layout import REPO_ROOT

from .conftest import A0Root, Panel, goto_host
from .test_settings_panel import DEFAULTS, expect, open_panel

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
    described = [section["description"] for section in SCHEMA["sections"] if "description" in section]
    descriptions = panel.page.locator(".a0r-section > .section-description").evaluate_all(
        "elements => elements.map((element) => element.textContent.trim())")
    assert descriptions[: len(described)] == described


def test_saved_choices_are_shown_chosen(panel: Panel, a0_root: A0Root) -> None:
    a0_root.save_global_config({"rerank_api": "qwen3_score", "rerank_hedge": "off", "rerank_apply": False})
    open_panel(panel)
    assert panel.control("rerank_api").input_value() == "qwen3_score"
    assert panel.control("rerank_hedge").input_value() == "off"
    assert not panel.control("rerank_apply").is_checked() and panel.control("rerank_enabled").is_checked()
    panel.unfold("rerank_hedge")
    panel.control("rerank_hedge").select_option("on")
    assert panel.form_config()["rerank_hedge"] == "on"


def test_hand_edited_values_the_plugin_takes_are_shown_as_it_reads_them(panel: Panel, a0_root: A0Root) -> None:
    """``"AUTO"``, ``"yes"`` and YAML's ``on`` (true) work in the plugin: the panel showed a blank choice and
    "Must be on or off." under a toggle that was on."""
    a0_root.save_global_config({"rerank_api": "AUTO", "rerank_apply": "no", "rerank_hedge": True})
    open_panel(panel)
    assert panel.control("rerank_api").input_value() == "auto"
    assert not panel.control("rerank_apply").is_checked()
    assert panel.control("rerank_hedge").input_value() == "on"
    for key in ("rerank_api", "rerank_apply", "rerank_hedge"):
        expect(panel.problem(key)).to_be_hidden()


def test_a_single_line_setting_with_a_control_character_is_refused_as_core_refuses_it(panel: Panel) -> None:
    """The API key (a header value) and the CA bundle (a file name) must be one line without control
    characters: the plugin refused a pasted tab on Save, which the panel let through."""
    open_panel(panel)
    panel.unfold("rerank_ca_bundle")
    panel.fill("rerank_ca_bundle", "/etc/ssl/ca\tbundle.pem")
    expect(panel.problem("rerank_ca_bundle")).to_have_text("Must not contain a line break or other control character.")
    panel.fill("rerank_ca_bundle", "/etc/ssl/ca-bundle.pem")
    expect(panel.problem("rerank_ca_bundle")).to_be_hidden()


def test_a_schema_that_does_not_load_is_a_notification_and_no_field_is_drawn(panel: Panel) -> None:
    panel.page.route("**/webui/settings-schema.json", lambda route: route.fulfill(status=404, body="gone"))
    goto_host(panel)
    panel.page.evaluate("() => window.openPluginSettings('a0_reranker')")
    panel.page.wait_for_function("() => globalThis.__a0Toasts.length > 0")
    [toast] = panel.toasts()
    assert toast["type"] == "error" and "settings-schema.json: HTTP 404" in toast["message"]
    opened = panel.page.locator(".a0r-panel")
    expect(opened.locator(".field")).to_have_count(0)
    expect(panel.stat("mode")).to_be_visible()  # the live status still shows
    expect(panel.test_button()).to_have_count(0)  # no form to test
    panel.errors[:] = [error for error in panel.errors if "404" not in error]  # the browser logs the 404


def test_the_panel_asks_agent_zero_for_no_defaults_of_its_own(panel: Panel, a0_root: A0Root) -> None:
    """The settings arrive complete (the plugin fills them on the server): the panel reads no defaults."""
    a0_root.save_global_config({"rerank_timeout": 5})
    open_panel(panel)
    actions = [call.body.get("action") for call in panel.host.calls("/api/plugins") if call.path == "/api/plugins"]
    assert actions == ["get_config"]
    assert panel.form_config() == {**DEFAULTS, "rerank_timeout": 5}
