"""Fixtures of the browser tier: Chromium (Debian's, driven by Playwright), Alpine.js from the npm
registry, an A0 stand-in root of its own, the loopback host page, and one fresh page per test.

Without Chromium, Playwright or Alpine these tests skip, naming what is missing; with
``A0R_REQUIRE_BROWSER=1`` (CI) they fail instead, so the tier cannot be skipped silently.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from helpers.standin import use_root

from support.a0_layout import PLUGIN_NAME, build_overlay_root

from .panel_host import PanelHost, serve_panel_host

ALPINE_VERSION = "3.14.9"  # the version Agent Zero v1.7 ships in webui/vendor/alpine
VENDOR_DIR = Path(__file__).resolve().parent / ".vendor"
ALPINE_JS = VENDOR_DIR / "node_modules" / "alpinejs" / "dist" / "cdn.min.js"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
_TRUTHY = {"1", "true", "yes", "on"}
# What A0 documents of its settings modal's store for a plugin's config.html (docs/agents/AGENTS.plugins.md
# "Plugin Settings", and plugin-settings.html): `config` is `context.settings`; `context.*` is the modal's
# state (the scope selected, whether it loads) and its footer's actions. Anything else is A0's own.
DOCUMENTED_CONTEXT = frozenset({"settings", "projectName", "agentProfileKey", "isLoading", "save", "resetToDefault"})


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUTHY


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under ``A0R_REQUIRE_BROWSER=1``."""
    if _env_flag("A0R_REQUIRE_BROWSER"):
        pytest.fail(f"A0R_REQUIRE_BROWSER is set but {reason}", pytrace=False)
    pytest.skip(f"{reason}; set A0R_REQUIRE_BROWSER=1 to make this an error")


def chromium_path() -> str | None:
    configured = os.environ.get("A0R_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def install_alpine() -> Path:
    """Alpine.js from the npm registry into tests/webui/.vendor (gitignored), once per machine. Under a lock:
    pytest-xdist's workers start their first browser tests together, and two npm installs into one folder fail."""
    VENDOR_DIR.mkdir(exist_ok=True)
    with (VENDOR_DIR / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if ALPINE_JS.is_file():
            return ALPINE_JS
        npm = shutil.which("npm")
        if npm is None:
            unavailable("npm is not installed, so Alpine.js cannot be fetched (apt-get install npm)")
        shutil.rmtree(VENDOR_DIR / "node_modules", ignore_errors=True)  # a partial install npm calls "up to date"
        command = [npm, "install", "--prefix", str(VENDOR_DIR), "--no-save", "--no-package-lock", "--no-audit",
                   "--no-fund", "--loglevel=error", f"alpinejs@{ALPINE_VERSION}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=100, check=False)
        if done.returncode != 0 or not ALPINE_JS.is_file():
            unavailable(f"`npm install alpinejs@{ALPINE_VERSION}` failed: {done.stderr.strip()[-400:]}")
        return ALPINE_JS


@pytest.fixture(scope="module")
def alpine_js() -> Path:
    return install_alpine()


@pytest.fixture(scope="module")
def browser(alpine_js: Path) -> Iterator[Any]:
    """Headless Debian Chromium, for this module only (Playwright's sync API keeps an event loop)."""
    if importlib.util.find_spec("playwright") is None:
        unavailable("the playwright package is not installed (pip install -e '.[test]')")
    executable = chromium_path()
    if executable is None:
        unavailable("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
    except Exception as exc:
        playwright.stop()
        unavailable(f"Chromium at {executable} did not start: {exc}")
    try:
        yield chromium
    finally:
        chromium.close()
        playwright.stop()


@dataclass
class A0Root:
    root: Path

    @property
    def plugin_dir(self) -> Path:
        return self.root / "usr" / "plugins" / PLUGIN_NAME

    @property
    def config_file(self) -> Path:
        return self.plugin_dir / "config.json"

    def save_global_config(self, settings: dict[str, Any]) -> None:
        self.config_file.write_text(json.dumps(settings), encoding="utf-8")

    def saved_config(self) -> dict[str, Any] | None:
        return json.loads(self.config_file.read_text(encoding="utf-8")) if self.config_file.exists() else None

    def plugin(self, module: str) -> Any:
        return importlib.import_module(f"usr.plugins.{PLUGIN_NAME}.{module}")


@pytest.fixture(scope="module")
def a0_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[A0Root]:
    root = build_overlay_root(tmp_path_factory.mktemp("a0"))
    with use_root(root):
        a0 = A0Root(root)
        try:
            yield a0
        finally:
            a0.plugin("service.runtime").shutdown()


@pytest.fixture(scope="module")
def host(a0_root: A0Root, alpine_js: Path) -> Iterator[PanelHost]:
    with serve_panel_host(alpine_js) as running:
        yield running


@dataclass
class Panel:
    """One browser page on the host, and what the tests do with the settings panel."""

    page: Any
    host: PanelHost
    errors: list[str] = field(default_factory=list)

    def open(self) -> None:
        self.page.evaluate("() => window.openPluginSettings('a0_reranker')")
        wait_until_drawn(self.page)

    def close(self) -> None:
        self.page.locator(".modal-footer .btn-cancel").click()
        self.page.locator(".a0r-panel").wait_for(state="detached")

    def control(self, key: str) -> Any:
        return self.page.locator(f'[data-setting="{key}"] .field-control').locator("input, select, textarea").first

    def unfold(self, key: str) -> None:
        """Open the folded section that holds ``key``, as a user clicks its title."""
        self.page.locator(f'[data-setting="{key}"]').evaluate("field => { field.closest('details').open = true; }")

    def fill(self, key: str, value: str) -> None:
        self.unfold(key)
        self.control(key).fill(value)

    def problem(self, key: str) -> Any:
        return self.page.locator(f'[data-setting="{key}"] .a0r-problem')

    def form_config(self) -> dict[str, Any]:
        """The modal's ``context.settings``: what Save would write."""
        return self.page.evaluate(
            "() => JSON.parse(JSON.stringify(Alpine.$data(document.querySelector('.a0r-panel')).config))"
        )

    def toasts(self) -> list[dict[str, str]]:
        return self.page.evaluate("() => globalThis.__a0Toasts.slice()")

    def test_button(self) -> Any:
        return self.page.locator(".a0r-test-button")

    def test_result(self) -> Any:
        return self.page.locator(".a0r-test-result")

    def fact(self, label: str) -> str:
        return str(self.page.locator(f'.a0r-fact[data-fact="{label}"] dd').inner_text())

    def stat(self, name: str) -> Any:
        return self.page.locator(f'.a0r-tile[data-stat="{name}"]')


@pytest.fixture
def panel(browser: Any, host: PanelHost, a0_root: A0Root) -> Iterator[Panel]:
    """A fresh page with the host loaded (the panel not opened yet); fails the test on any page error."""
    runtime = a0_root.plugin("service.runtime")
    runtime.shutdown()  # no breaker or detection cache left from another test's server
    runtime.stats_recorder().reset()
    host.forget_calls()
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    current = Panel(page, host)

    def on_console(message: Any) -> None:
        if message.type == "error":
            current.errors.append(f"console: {message.text}")

    page.on("pageerror", lambda error: current.errors.append(f"page error: {error}"))
    page.on("console", on_console)
    try:
        yield current
        touched = context_touches(page)
    finally:
        context.close()
        a0_root.config_file.unlink(missing_ok=True)
    assert current.errors == [], current.errors
    assert touched - DOCUMENTED_CONTEXT == set(), f"the panel touched A0's private store fields {sorted(touched)}"


def context_touches(page: Any) -> set[str]:
    """The properties of the modal's store the panel touched (the host's audit), in this page."""
    return set(page.evaluate("() => [...(globalThis.__a0ContextTouched ?? [])]"))


def wait_until_drawn(page: Any) -> None:
    """The panel's fields are drawn (the endpoint is the first) and its schema is in."""
    page.locator('[data-setting="rerank_endpoint"] textarea').wait_for(state="visible")
    page.wait_for_function("() => Alpine.$data(document.querySelector('.a0r-panel')).ready === true")


def goto_host(panel: Panel) -> None:
    panel.page.goto(panel.host.url + "/")
    panel.page.wait_for_function("() => window.__hostReady === true")
