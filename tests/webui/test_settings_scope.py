"""The settings panel per scope (issue 14, acceptance 4), in headless Chromium on a host whose modal has
A0's scope toolbar: with ``per_agent_config`` the Agent profile selector is on, a profile's settings
load and save at that profile only, and the panel's live status follows the scope the modal shows."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import A0Root, Panel, goto_host, wait_until_drawn

pytestmark = pytest.mark.browser

PROFILE, PROFILE_TITLE = "researcher", "Researcher"
GLOBAL = {"rerank_endpoint": "http://global.lan:8002"}


def expect(target: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


@pytest.fixture
def profiles(a0_root: A0Root) -> Iterator[Any]:
    """A user agent profile, as A0 lists it (``usr/agents/<name>/agent.yaml``), and a saved global config."""
    folder = a0_root.root / "usr" / "agents" / PROFILE
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(f"title: {PROFILE_TITLE}\n", encoding="utf-8")
    a0_root.save_global_config(GLOBAL)
    try:
        yield folder / "plugins" / "a0_reranker" / "config.json"
    finally:
        shutil.rmtree(folder)


def open_at(panel: Panel, profile: str = "") -> None:
    goto_host(panel)
    panel.page.evaluate(f"() => window.openPluginSettings('a0_reranker', '', {json.dumps(profile)})")
    wait_until_drawn(panel.page)


def scope_line(panel: Panel) -> Any:
    return panel.page.locator('[data-stat="scope"] strong')


def last_status_scope(panel: Panel) -> Any:
    return panel.host.plugin_calls("status")[-1].body


def test_the_modal_offers_the_agent_profile_scope_and_the_panel_names_its_scope(
        panel: Panel, profiles: Any) -> None:
    open_at(panel)
    scope = panel.page.locator(".plugin-settings-scope-section")
    expect(scope).to_be_visible()
    expect(panel.page.locator(".plugin-settings-profile")).to_be_enabled()  # per_agent_config: true
    expect(panel.page.locator(".plugin-settings-project")).to_be_enabled()  # per_project_config: true
    options = panel.page.locator(".plugin-settings-profile option").all_inner_texts()
    assert options == ["All profiles", PROFILE_TITLE]
    expect(scope_line(panel)).to_have_text("Global, All profiles")
    assert last_status_scope(panel) == {"project_name": "", "agent_profile": ""}
    assert panel.control("rerank_endpoint").input_value() == GLOBAL["rerank_endpoint"]


def test_a_profiles_settings_are_saved_at_that_profile_only_and_the_status_follows_the_scope(
        panel: Panel, a0_root: A0Root, profiles: Any) -> None:
    open_at(panel)
    expect(panel.stat("mode").locator(".a0r-tile-value")).to_have_text("Live")
    panel.page.select_option(".plugin-settings-profile", PROFILE)
    info = panel.page.locator(".plugin-settings-scope-info")
    expect(info).to_contain_text("Settings do not yet exist for this combination, settings from Global, All profiles")
    expect(scope_line(panel)).to_have_text(f"Global, {PROFILE_TITLE}")
    assert last_status_scope(panel) == {"project_name": "", "agent_profile": PROFILE}
    assert panel.control("rerank_endpoint").input_value() == GLOBAL["rerank_endpoint"]  # what applies there now

    panel.fill("rerank_endpoint", "http://researcher.lan:8002")
    panel.page.locator('[data-setting="rerank_enabled"] .toggler').click()  # the switch A0 draws over the box
    assert not panel.control("rerank_enabled").is_checked()
    panel.page.locator(".modal-footer .btn-ok").click()  # A0's Save, at the selected scope
    panel.page.locator(".a0r-panel").wait_for(state="detached")
    saved = json.loads(profiles.read_text(encoding="utf-8"))
    assert saved["rerank_endpoint"] == "http://researcher.lan:8002" and saved["rerank_enabled"] is False
    assert a0_root.saved_config() == GLOBAL  # the global settings are untouched

    open_at(panel, PROFILE)
    expect(panel.page.locator(".plugin-settings-scope-info")).to_be_hidden()  # the profile has its own now
    expect(panel.stat("mode").locator(".a0r-tile-value")).to_have_text("Off")
    panel.page.select_option(".plugin-settings-profile", "")
    expect(panel.stat("mode").locator(".a0r-tile-value")).to_have_text("Live")
    expect(scope_line(panel)).to_have_text("Global, All profiles")
    assert panel.control("rerank_endpoint").input_value() == GLOBAL["rerank_endpoint"]
