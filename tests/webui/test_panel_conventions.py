"""The settings panel keeps Agent Zero's UI conventions (issue 23, item 3; A0's
``docs/agents/AGENTS.components.md`` and ``docs/agents/AGENTS.plugins.md``):

1. a store is used only inside ``<template x-if="$store.<name>">``, so nothing draws before it registers;
2. modules are imported by their absolute A0 paths (``/plugins/a0_reranker/webui/...``), never relatively;
3. colours are A0's CSS variables (``--color-error-text``, ``--color-warning-text`` ...), none written out
   but as a ``var()`` fallback;
4. failures reach the user as A0 notifications, not as red lines of the panel's own;
5. of the modal's store (A0's ``plugin-settings-store.js``) the panel touches only what A0 documents for
   a plugin's ``config.html``: ``config`` (``context.settings``), the scope (``context.projectName``,
   ``context.agentProfileKey``), ``context.isLoading``, and the footer's ``context.save()`` and
   ``context.resetToDefault()``. Its private fields (``_toComparableJson``, ``settingsSnapshotJson`` ...)
   are A0's to change.

The first three and the fifth are read from the files; the fifth and the fourth are also watched in headless
Chromium, where the host hands the panel its ``context`` through an audit that records every property the
panel touches (``host/boot.js``); the ``panel`` fixture checks that record after every browser test.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from support.a0_layout import REPO_ROOT
from support.servers import serve_in_thread

from .conftest import DOCUMENTED_CONTEXT, A0Root, Panel, context_touches, goto_host
from .test_settings_panel import expect, open_panel, rerank_a_few

WEBUI = REPO_ROOT / "webui"
SOURCES = sorted(path for path in WEBUI.iterdir() if path.suffix in (".html", ".js", ".css"))
STORE_NAME = "a0RerankerConfig"
HEX_COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b")
COLOUR_FUNCTION = re.compile(r"\b(?:rgba?|hsla?)\(")
VAR_FALLBACK = re.compile(r"var\(--[\w-]+,\s*#[0-9a-fA-F]{3,8}\)")
IMPORTED = re.compile(r"""(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)["']([^"']+)["']|<script[^>]*\ssrc=["']([^"']+)["']""")
CONTEXT_FIELD = re.compile(r"\bcontext\??\.\s*([A-Za-z_$][\w$]*)")


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# --- 1. the store gate -------------------------------------------------------------------------------------


class StoreUses(HTMLParser):
    """Every ``$store.<name>`` in an attribute, with the stores gated by the ``<template x-if>`` around it."""

    def __init__(self) -> None:
        super().__init__()
        self.uses: list[tuple[str, frozenset[str]]] = []
        self.open: list[tuple[str, str | None]] = []  # (tag, the store its x-if gates, if any)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        gated = frozenset(store for _tag, store in self.open if store)
        gate = re.fullmatch(r"\$store\.(\w+)", (dict(attrs).get("x-if") or "").strip()) if tag == "template" else None
        for name, value in attrs:
            if name != "x-if" or gate is None:
                self.uses += [(store, gated) for store in re.findall(r"\$store\.(\w+)", value or "")]
        if tag not in ("input", "meta", "link", "br", "img"):
            self.open.append((tag, gate.group(1) if gate else None))

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()[0] != tag:
            pass


def test_the_panel_uses_its_store_only_behind_an_x_if_gate() -> None:
    uses = StoreUses()
    uses.feed(text(WEBUI / "config.html"))
    assert uses.uses, "config.html draws the panel from its store"
    assert [(store, sorted(gated)) for store, gated in uses.uses if store not in gated] == []
    body = text(WEBUI / "config.html").split("<body>", 1)[1]
    assert re.match(rf'\s*(<!--.*?-->\s*)?<div x-data>\s*<template x-if="\$store\.{STORE_NAME}">', body, re.DOTALL)


# --- 2. absolute imports ---------------------------------------------------------------------------------------


def imports_of(path: Path) -> list[str]:
    return [first or second for first, second in IMPORTED.findall(text(path))]


def test_every_module_is_imported_by_its_absolute_a0_path() -> None:
    imported = {path.name: imports_of(path) for path in SOURCES}
    assert imported["config.html"] and imported["reranker-config-store.js"]  # the check sees them
    relative = {name: [target for target in targets if not target.startswith("/")] for name, targets in imported.items()}
    assert {name: targets for name, targets in relative.items() if targets} == {}
    own = {target for targets in imported.values() for target in targets if "reranker" in target}
    assert own and all(target.startswith("/plugins/a0_reranker/webui/") for target in own), own


# --- 3. A0's colours ------------------------------------------------------------------------------------------


def test_no_colour_is_written_out_but_as_a_var_fallback() -> None:
    written = {path.name: HEX_COLOUR.findall(VAR_FALLBACK.sub("", text(path))) + COLOUR_FUNCTION.findall(text(path))
               for path in SOURCES}
    assert {name: colours for name, colours in written.items() if colours} == {}
    styles = text(WEBUI / "config.html")
    for variable in ("--color-error-text", "--color-warning-text", "--color-border"):
        assert f"var({variable}" in styles, variable


# --- 5. A0's store, as the files touch it ------------------------------------------------------------------------


def test_the_files_touch_only_the_store_fields_a0_documents() -> None:
    touched = {field for path in SOURCES for field in CONTEXT_FIELD.findall(text(path))}
    assert {"projectName", "agentProfileKey"} <= touched  # the check sees the panel's uses
    assert touched - DOCUMENTED_CONTEXT == set()


# --- in the browser: 4 and 5 ---------------------------------------------------------------------------------------


@pytest.mark.browser
def test_the_panel_touches_only_what_a0_documents_through_a_whole_session(panel: Panel, a0_root: A0Root) -> None:
    """Open (settings loaded and completed), edit, Test, switch scope, refresh the status, Save: the
    audit has seen the panel touch the store, and nothing A0 keeps to itself."""
    with serve_in_thread("infinity") as server:
        a0_root.save_global_config({"rerank_endpoint": server.url, "rerank_timeout": 5})
        panel.page.clock.install()
        open_panel(panel)
        panel.fill("rerank_candidates", "12")
        panel.test_button().click()
        expect(panel.test_result()).to_have_attribute("data-ok", "true")
        panel.page.clock.fast_forward(3_500)  # a status refresh
        panel.page.locator(".modal-footer .btn-ok").click()  # A0's Save
        panel.page.locator(".a0r-panel").wait_for(state="detached")
    assert (a0_root.saved_config() or {})["rerank_candidates"] == 12
    touched = context_touches(panel.page)
    assert {"settings", "projectName", "agentProfileKey"} <= touched  # the audit saw the panel
    assert touched - DOCUMENTED_CONTEXT == set()


@pytest.mark.browser
def test_the_audit_sees_a_touch_of_a_private_field(panel: Panel) -> None:
    """What the panel used to do to fill missing keys: the audit records it (the fixture would fail it)."""
    open_panel(panel)
    panel.page.evaluate("""() => {
      const panel = Alpine.$data(document.querySelector('.a0r-panel'));
      panel.context.settingsSnapshotJson = panel.context._toComparableJson(panel.config);
    }""")
    assert {"settingsSnapshotJson", "_toComparableJson"} <= context_touches(panel.page)
    panel.page.evaluate("() => globalThis.__a0ContextTouched.clear()")  # not the panel's doing


@pytest.mark.browser
def test_an_unavailable_status_is_one_notification_not_a_red_line(panel: Panel) -> None:
    failing = {"on": True}

    def status(route: Any) -> None:
        if failing["on"]:
            route.fulfill(status=500, body="boom")
        else:
            route.continue_()

    panel.page.route("**/api/plugins/a0_reranker/status", status)
    panel.page.clock.install()
    goto_host(panel)
    panel.open()
    panel.page.wait_for_function("() => globalThis.__a0Toasts.length > 0")
    for _ in range(3):
        panel.page.clock.fast_forward(3_500)  # three more refreshes fail
    panel.page.wait_for_function("() => window.fetch && true")
    errors = [toast for toast in panel.toasts() if toast["type"] == "error"]
    assert len(errors) == 1 and errors[0]["message"].startswith("Live status is unavailable"), errors
    assert "unavailable" not in red_text(panel)
    failing["on"] = False
    panel.page.clock.fast_forward(3_500)
    expect(panel.stat("mode")).to_be_visible()
    failing["on"] = True
    panel.page.clock.fast_forward(3_500)
    panel.page.wait_for_function("() => globalThis.__a0Toasts.length > 1")  # failing again: said again, once
    panel.errors[:] = [error for error in panel.errors if "500" not in error]  # the browser logs the 500s


def red_text(panel: Panel) -> str:
    """The panel's visible text drawn in A0's error colour."""
    return str(panel.page.evaluate("""() => {
      const red = getComputedStyle(document.documentElement).getPropertyValue('--color-error-text').trim();
      const probe = document.createElement('span');
      probe.style.color = red;
      document.body.appendChild(probe);
      const rgb = getComputedStyle(probe).color;
      probe.remove();
      return [...document.querySelectorAll('.a0r-panel *')]
        .filter((element) => element.checkVisibility() && getComputedStyle(element).color === rgb)
        .map((element) => element.textContent).join(' | ');
    }"""))


@pytest.mark.browser
def test_saved_settings_that_are_invalid_are_a_notification(panel: Panel, a0_root: A0Root) -> None:
    a0_root.save_global_config({"rerank_endpoint": "ftp://files.lan", "rerank_timeout": 5})
    open_panel(panel)
    expect(panel.stat("mode")).to_contain_text("Inert")
    expect(panel.stat("mode").locator('[data-status="problem"]')).to_contain_text("rerank_endpoint")
    toast = next(toast for toast in panel.toasts() if toast["type"] == "error")
    assert toast["message"].startswith("The saved settings are invalid: rerank_endpoint")
    assert "invalid" not in red_text(panel)


@pytest.mark.browser
def test_reranks_through_the_api_do_not_leave_the_tiles_disagreeing(panel: Panel, a0_root: A0Root) -> None:
    """"FALLBACKS 0 — every recall was reranked" stood beside "RERANKED 0 of 0", and "9 of 9" beside a pool
    tile saying no recall was reranked yet."""
    open_panel(panel)
    expect(panel.stat("reranked").locator(".a0r-tile-value")).to_have_text("0 of 0")
    expect(panel.stat("fallbacks")).to_contain_text("nothing asked yet")
    expect(panel.stat("pool")).to_contain_text("no recall reranked yet")
    panel.close()
    with serve_in_thread("infinity") as server:
        rerank_a_few(a0_root, server.url)  # the API: no memory recall, so no pool
        open_panel(panel)
        expect(panel.stat("reranked").locator(".a0r-tile-value")).to_have_text("3 of 3")
    expect(panel.stat("fallbacks")).to_contain_text("every rerank succeeded")
    expect(panel.stat("pool")).to_contain_text("the 3 reranked came through the API")


# --- the panel's shape (issue 23, item 9) ------------------------------------------------------------------------


@pytest.mark.browser
def test_the_endpoint_is_first_on_the_first_screen_and_the_panel_is_short(panel: Panel, a0_root: A0Root) -> None:
    """The panel was about 4,000 px tall, the endpoint at the bottom edge of the first screen: now the
    endpoint comes first, and what a newcomer need not touch is folded away."""
    with serve_in_thread("infinity") as first, serve_in_thread("infinity") as second:
        endpoint = f"{first.url}, {second.url}"
        rerank_a_few(a0_root, endpoint)
        a0_root.save_global_config({"rerank_endpoint": endpoint})
        open_panel(panel)
        panel.test_button().click()
        expect(panel.test_result()).to_have_attribute("data-ok", "true")  # the test's result and the status shown
        expect(panel.page.locator('[data-stat="servers"] .a0r-server')).to_have_count(2)
    screen = panel.page.viewport_size["height"]
    fields = panel.page.locator('.a0r-panel .field[data-setting^="rerank_"]')
    assert fields.first.get_attribute("data-setting") == "rerank_endpoint"
    control = panel.control("rerank_endpoint").bounding_box()
    assert control is not None and control["y"] + control["height"] <= 0.6 * screen, control
    modal = panel.page.locator(".modal-inner").bounding_box()
    assert modal is not None and modal["height"] <= 2.8 * screen, modal
    folded = panel.page.locator("details.a0r-section:not([open])").evaluate_all("s => s.map(d => d.dataset.section)")
    assert folded == ["quality", "batching", "reliability"]


@pytest.mark.browser
@pytest.mark.parametrize("separator", [", ", "\n"])
def test_the_endpoint_shows_every_replica(panel: Panel, separator: str) -> None:
    """A one-line input clipped the second replica of a list."""
    open_panel(panel)
    replicas = [f"https://reranker-replica-{n}.inference.example.internal:8443" for n in range(1, 4)]
    panel.fill("rerank_endpoint", separator.join(replicas))
    field = panel.control("rerank_endpoint")
    assert field.evaluate("element => element.tagName") == "TEXTAREA"
    width, shown_width, height, shown_height = field.evaluate(
        "t => [t.scrollWidth, t.clientWidth, t.scrollHeight, t.clientHeight]")
    assert (width, height) == (shown_width, shown_height)  # nothing scrolled out of sight
    expect(panel.problem("rerank_endpoint")).to_be_hidden()
