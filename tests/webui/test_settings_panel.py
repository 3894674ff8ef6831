"""The settings panel in headless Chromium, hosted the way Agent Zero's plugin-settings modal hosts it,
its API calls answered by the plugin's real handlers and loopback reranker servers (issue 5)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.a0_layout import REPO_ROOT
from support.servers import Respond, serve_in_thread
from usr.plugins.a0_reranker.core.config import API_MODES

from .conftest import A0Root, Panel, goto_host

pytestmark = pytest.mark.browser

DEFAULTS = yaml.safe_load((REPO_ROOT / "default_config.yaml").read_text(encoding="utf-8"))
SECRET = "sk-panel-9d2b7e41c0aa"
DOCUMENTS = [
    "Paris is the capital and largest city of France.",
    "The mitochondria is the powerhouse of the cell.",
    "Bananas are rich in potassium.",
    "France borders Spain, Italy and Germany.",
]
QUERIES = ["What is the capital of France?", "Which countries border France?", "Where is energy made in the cell?"]
SECTIONS = {  # in the panel's order: the endpoint first
    "connection": ["rerank_endpoint", "rerank_api", "rerank_model", "rerank_api_key"],
    "behaviour": ["rerank_enabled", "rerank_apply"],
    "quality": ["rerank_candidates", "rerank_pool_threshold", "rerank_min_score", "rerank_instruction",
                "rerank_max_doc_chars", "rerank_max_query_chars", "rerank_timeout"],
    "batching": ["rerank_batch_window_ms", "rerank_max_concurrency", "rerank_max_pairs_per_request",
                 "rerank_max_queued_pairs", "rerank_shed_overload"],
    "reliability": ["rerank_breaker_failures", "rerank_breaker_failure_rate", "rerank_breaker_cooldown",
                    "rerank_max_retries", "rerank_retry_budget", "rerank_hedge", "rerank_hedge_delay_ms",
                    "rerank_tls_verify", "rerank_ca_bundle"],
}
SCREENSHOT = REPO_ROOT / "docs" / "settings-panel.png"
# every x-model of the panel, read while each setting holds its own name: (the setting it reads, its field)
BOUND_SETTINGS = """() => {
  const panel = document.querySelector('.a0r-panel');
  const config = Alpine.$data(panel).config;
  const saved = { ...config };
  for (const key of Object.keys(config)) config[key] = `bound:${key}`;
  const bound = [...panel.querySelectorAll('*')].flatMap((element) => [...element.attributes]
    .filter((attribute) => attribute.name.startsWith('x-model'))
    .map((attribute) => [String(Alpine.evaluate(element, attribute.value)).replace(/^bound:/, ''),
                         element.closest('[data-setting]')?.dataset.setting]));
  Object.assign(config, saved);
  return bound;
}"""
COUNT_STATUS_FETCHES = """() => {
  window.__statusFetches = 0;
  const original = window.fetch;
  window.fetch = (url, ...rest) => {
    if (String(url).endsWith("/a0_reranker/status")) window.__statusFetches += 1;
    return original(url, ...rest);
  };
}"""


def expect(target: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


def open_panel(panel: Panel) -> None:
    goto_host(panel)
    panel.open()


def rerank_a_few(a0_root: A0Root, endpoint: str, **settings: Any) -> None:
    """Reranks through the public API, as another plugin or a recall would."""
    reranker = a0_root.plugin("helpers.reranker")
    config = {"rerank_endpoint": endpoint, "rerank_timeout": 5, **settings}
    for query in QUERIES:
        assert reranker.rerank(query, DOCUMENTS, config=config) is not None


def test_every_setting_of_default_config_is_in_the_panel(panel: Panel) -> None:
    open_panel(panel)
    bound = panel.page.evaluate(BOUND_SETTINGS)
    assert sorted(key for key, _field in bound) == sorted(DEFAULTS)
    assert all(key == field for key, field in bound), bound  # each control binds its own field's setting
    for section, keys in SECTIONS.items():
        placed = panel.page.locator(f'[data-section="{section}"] .field[data-setting^="rerank_"]')
        assert placed.evaluate_all("fields => fields.map(f => f.dataset.setting)") == keys
    titles = panel.page.locator(".a0r-section > .section-title").evaluate_all(
        "titles => titles.map((title) => title.firstElementChild?.textContent ?? title.textContent)")
    assert titles == ["Connection", "Behaviour", "Quality & performance", "Batching", "Reliability & security",
                      "Live status"]
    for key in DEFAULTS:
        expect(panel.control(key)).to_be_attached()
        assert panel.page.locator(f'[data-setting="{key}"] .field-description').text_content().strip(), key
    assert panel.control("rerank_api_key").get_attribute("type") == "password"
    assert panel.control("rerank_api").locator("option").evaluate_all("os => os.map(o => o.value)") == list(API_MODES)
    instruction = panel.page.locator('[data-setting="rerank_instruction"]').text_content() or ""
    assert "used in qwen3_score mode" in instruction and "vLLM's /rerank" in instruction


def test_missing_keys_are_filled_with_the_plugins_defaults(panel: Panel, a0_root: A0Root) -> None:
    older = {"rerank_endpoint": "http://reranker.lan:8002", "rerank_candidates": 12, "rerank_timeout": 5}
    a0_root.save_global_config(older)  # a config.json saved by an older version: most keys missing
    open_panel(panel)
    assert panel.control("rerank_candidates").input_value() == "12"
    assert panel.control("rerank_max_queued_pairs").input_value() == str(DEFAULTS["rerank_max_queued_pairs"])
    assert panel.control("rerank_instruction").input_value() == DEFAULTS["rerank_instruction"]
    assert panel.control("rerank_tls_verify").is_checked()
    assert panel.form_config() == {**DEFAULTS, **older}
    unsaved = "() => Alpine.$data(document.querySelector('.a0r-panel')).modal.hasUnsavedChanges"
    assert panel.page.evaluate(unsaved) is False  # filling defaults is not a change of the user's

    panel.fill("rerank_max_concurrency", "8")
    assert panel.page.evaluate(unsaved) is True
    panel.page.locator(".modal-footer .btn-ok").click()  # A0's Save
    panel.page.locator(".a0r-panel").wait_for(state="detached")
    assert a0_root.saved_config() == {**DEFAULTS, **older, "rerank_max_concurrency": 8}


@pytest.mark.parametrize(("kind", "api", "path"), [("vllm_qwen3", "qwen3_score", "/score"), ("infinity", "rerank", "/rerank")])
def test_test_connection_shows_the_detected_api_and_margin(
    panel: Panel, a0_root: A0Root, kind: str, api: str, path: str
) -> None:
    with serve_in_thread(kind) as server:
        open_panel(panel)
        panel.fill("rerank_endpoint", server.url)  # typed, not saved
        server.gate.hold()
        panel.test_button().click()
        expect(panel.test_button()).to_be_disabled()
        expect(panel.test_button()).to_have_text("Testing…")
        expect(panel.page.locator(".a0r-test-progress")).to_be_visible()
        server.gate.wait_held_sync(1)
        server.gate.release()
        expect(panel.test_result()).to_have_attribute("data-ok", "true")
        expect(panel.test_button()).to_be_enabled()
    expect(panel.test_button()).to_have_text("Test connection")
    assert panel.fact("Detected API") == api and panel.fact("Path") == path
    assert panel.fact("URL") == server.url + path
    assert float(panel.fact("Margin")) > 0
    assert re.fullmatch(r"[\d.,]+ ms", panel.fact("Latency"))
    for label in ("Server", "URL", "Relevant score", "Irrelevant score"):
        assert panel.fact(label)
    result = panel.test_result().inner_text()
    assert "Reranks correctly" in result and "Test does not save" in result
    assert panel.toasts()[-1]["type"] == "success"
    [call] = panel.host.plugin_calls("test_connection")
    assert call.body["config"]["rerank_endpoint"] == server.url  # the form's value went out
    assert a0_root.saved_config() is None  # and nothing was saved


def test_a_dead_endpoint_gets_a_clear_error(panel: Panel) -> None:
    with serve_in_thread("infinity") as server:
        dead = server.url
    open_panel(panel)
    panel.fill("rerank_endpoint", dead)
    panel.fill("rerank_timeout", "2")
    panel.test_button().click()
    expect(panel.test_result()).to_have_attribute("data-ok", "false")
    result = panel.test_result().inner_text()
    assert "Not working" in result and "Test does not save" in result
    assert re.search(r"connect|refused|reach", result, re.IGNORECASE)
    toast = panel.toasts()[-1]
    assert toast["type"] == "error" and toast["message"].startswith("Not working:")


def test_bad_input_is_refused_in_the_browser_and_nothing_is_sent(panel: Panel) -> None:
    open_panel(panel)
    panel.fill("rerank_endpoint", "ftp://files.example.com")
    panel.fill("rerank_candidates", "0")
    panel.fill("rerank_timeout", "601")
    panel.fill("rerank_max_concurrency", "2.5")
    expect(panel.problem("rerank_endpoint")).to_have_text("The URL must start with http:// or https://.")
    expect(panel.problem("rerank_candidates")).to_have_text("Enter a whole number from 1 to 1,000.")
    expect(panel.problem("rerank_timeout")).to_have_text("Enter a number from 0.05 to 600.")
    expect(panel.problem("rerank_max_concurrency")).to_have_text("Enter a whole number from 1 to 256.")
    expect(panel.control("rerank_timeout")).to_have_class(re.compile(r"\ba0r-invalid\b"))
    panel.test_button().click()
    expect(panel.test_result()).to_contain_text(
        "Fix these settings first: Reranker endpoint, Candidate pool, Timeout (seconds), Max concurrency. "
        "Nothing was sent."
    )
    assert panel.toasts()[-1]["type"] == "error"

    for key, value in [("rerank_candidates", "20"), ("rerank_timeout", "10"), ("rerank_max_concurrency", "4")]:
        panel.fill(key, value)
        expect(panel.problem(key)).to_be_hidden()
    panel.fill("rerank_endpoint", "")
    panel.test_button().click()
    expect(panel.problem("rerank_endpoint")).to_contain_text("Enter your reranker server's base URL")
    panel.fill("rerank_endpoint", "http://user:pw@reranker.lan:8002")
    expect(panel.problem("rerank_endpoint")).to_have_text(
        "The URL must not contain a user name or password (put a key in API key).")
    panel.fill("rerank_endpoint", "http://reranker.lan:8002")
    expect(panel.problem("rerank_endpoint")).to_be_hidden()
    assert panel.host.plugin_calls("test_connection") == []  # nothing was sent while the form was bad


def test_live_status_shows_counters_and_stops_refreshing_when_closed(panel: Panel, a0_root: A0Root) -> None:
    with serve_in_thread("infinity") as server:
        rerank_a_few(a0_root, server.url)
        a0_root.save_global_config({"rerank_endpoint": server.url})
        panel.page.clock.install()  # the page's timers, so the refresh can be stepped
        open_panel(panel)
        expect(panel.stat("reranked").locator(".a0r-tile-value")).to_have_text("3 of 3")
        expect(panel.stat("mode")).to_contain_text("Live")
        expect(panel.stat("fallbacks").locator(".a0r-tile-value")).to_have_text("0")
        expect(panel.stat("breakers")).to_contain_text("closed")
        expect(panel.stat("breakers")).to_contain_text(server.url)
        assert re.fullmatch(r"[\d.]+", panel.stat("mean-pairs").locator(".a0r-tile-value").inner_text())
        assert re.fullmatch(r"[\d.,]+ ms / [\d.,]+ ms", panel.stat("latency").locator(".a0r-tile-value").inner_text())
        assert re.fullmatch(r"[\d.]+ of [\d.]+ /s", panel.stat("load").locator(".a0r-tile-value").inner_text())
        expect(panel.stat("load")).to_contain_text("none shed; queue wait p50 / p95")

        rerank_a_few(a0_root, server.url)
        with serve_in_thread("infinity") as gone:
            dead = gone.url
        a0_root.plugin("helpers.reranker").rerank("q", DOCUMENTS, config={"rerank_endpoint": dead, "rerank_timeout": 2})
        panel.page.clock.fast_forward(3_500)
        expect(panel.stat("reranked").locator(".a0r-tile-value")).to_have_text("6 of 7")
    expect(panel.stat("fallbacks").locator(".a0r-tile-value")).to_have_text("1")
    expect(panel.stat("fallbacks").locator(".a0r-chip")).to_have_count(1)
    # the saved settings' server alone: the dead one an API caller named is in no settings the panel shows
    expect(panel.stat("breakers").locator(".a0r-breaker")).to_have_count(1)
    expect(panel.stat("breakers")).not_to_contain_text(dead)

    panel.page.evaluate(COUNT_STATUS_FETCHES)
    panel.close()
    refreshes = len(panel.host.plugin_calls("status"))
    panel.page.clock.fast_forward(60_000)  # every timer left behind would fire now, and fetch at once
    assert panel.page.evaluate("() => window.__statusFetches") == 0
    panel.page.evaluate("() => fetch('/').then(r => r.ok)")
    assert len(panel.host.plugin_calls("status")) == refreshes


def test_live_status_counts_the_requests_sent_again(panel: Panel, a0_root: A0Root) -> None:
    with serve_in_thread("infinity") as server:
        rerank_a_few(a0_root, server.url)
        failed: list[Any] = []
        overloaded = Respond(503, {"error": {"message": "model is overloaded", "type": None, "param": None,
                                             "code": 503}})
        server.set_fault(lambda r: (failed.append(r) or overloaded) if r.method == "POST" and not failed else None)
        rerank_a_few(a0_root, server.url)
        a0_root.save_global_config({"rerank_endpoint": server.url})
        open_panel(panel)
        expect(panel.stat("reranked").locator(".a0r-tile-value")).to_have_text("6 of 6")
        expect(panel.stat("retries").locator(".a0r-tile-value")).to_have_text("1")
        expect(panel.stat("retries")).to_contain_text("recalls saved by a retry: 1")


def starve_a_few_pools(a0_root: A0Root, endpoint: str) -> None:
    """Recalls whose pool holds no more than they return, through the recall path's own function (on
    a thread of its own: Playwright's sync API owns this thread's event loop)."""
    runtime = a0_root.plugin("service.runtime")
    config = a0_root.plugin("core.config").RerankerConfig(endpoint=endpoint, timeout=5)

    def recall() -> Any:
        return asyncio.run(runtime.rerank_pool(QUERIES[0], DOCUMENTS, limit=len(DOCUMENTS), config=config))

    with concurrent.futures.ThreadPoolExecutor(1) as worker:
        for _ in range(5):
            assert worker.submit(recall).result().applied


def test_live_status_shows_the_pool_its_hint_and_a_setting_warning(panel: Panel, a0_root: A0Root) -> None:
    with serve_in_thread("infinity") as server:
        starve_a_few_pools(a0_root, server.url)
        a0_root.save_global_config({"rerank_endpoint": server.url, "rerank_timeout": 20})
        open_panel(panel)
        expect(panel.stat("pool").locator(".a0r-tile-value")).to_have_text("4")
        expect(panel.stat("pool")).to_contain_text("over 5 recalls; 100% had nothing to choose; 0 rescued")
        expect(panel.page.locator('[data-status="hint"]')).to_contain_text("Pools are starved")
        expect(panel.page.locator('[data-status="hint"]')).to_contain_text("Lower rerank_pool_threshold (now 0.5)")
        expect(panel.page.locator('[data-status="warning"]')).to_contain_text("Setting warning: rerank_timeout 20 s")
        panel.test_button().click()
        expect(panel.test_result()).to_have_attribute("data-ok", "true")
        expect(panel.test_result().locator(".a0r-test-warning")).to_contain_text("past Agent Zero's 30 s")


def test_the_api_key_is_a_password_and_no_reply_carries_it(panel: Panel, a0_root: A0Root) -> None:
    wrong = "sk-wrong-5e8a1f00"
    with serve_in_thread("infinity", api_key=SECRET) as server:
        a0_root.save_global_config({"rerank_endpoint": server.url, "rerank_api_key": SECRET})
        assert a0_root.plugin("helpers.reranker").rerank(QUERIES[0], DOCUMENTS) is not None
        open_panel(panel)
        key_field = panel.control("rerank_api_key")
        assert key_field.get_attribute("type") == "password" and key_field.input_value() == SECRET
        panel.test_button().click()
        expect(panel.test_result()).to_have_attribute("data-ok", "true")
        panel.fill("rerank_api_key", wrong)
        panel.test_button().click()
        expect(panel.test_result()).to_have_attribute("data-ok", "false")
        panel.page.evaluate("() => Alpine.$data(document.querySelector('.a0r-panel')).refreshStatus()")
    replies = panel.host.calls("/api/plugins/a0_reranker/")
    assert {call.path.rsplit("/", 1)[-1] for call in replies} == {"test_connection", "status"}
    for call in replies:
        assert SECRET not in call.reply and wrong not in call.reply, call.path
    assert SECRET not in panel.page.locator("body").inner_text()
    assert [c.body["config"]["rerank_api_key"] for c in panel.host.plugin_calls("test_connection")] == [SECRET, wrong]


def test_screenshot_of_the_panel_after_a_successful_test(panel: Panel, a0_root: A0Root) -> None:
    """The settings page's picture: two replicas of one model, tested, with their live status."""
    with serve_in_thread("vllm_qwen3") as first, serve_in_thread("vllm_qwen3") as second:
        endpoint = f"{first.url}, {second.url}"
        for _ in range(3):
            rerank_a_few(a0_root, endpoint)
        a0_root.save_global_config({"rerank_endpoint": endpoint})
        open_panel(panel)
        panel.test_button().click()
        expect(panel.test_result()).to_have_attribute("data-ok", "true")
        expect(panel.test_result().locator(".a0r-replica")).to_have_count(2)
        expect(panel.stat("reranked").locator(".a0r-tile-value")).to_have_text("9 of 9")
        expect(panel.page.locator('[data-stat="servers"] .a0r-server')).to_have_count(2)
        target = screenshot_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        panel.page.locator(".modal-inner").screenshot(path=str(target), animations="disabled")
    width, height = png_size(target.read_bytes())
    assert width >= 800 and height >= 1500


def screenshot_path() -> Path:
    """docs/settings-panel.png only when asked (A0R_UPDATE_SCREENSHOT=1), so test runs leave the tree clean."""
    if os.environ.get("A0R_UPDATE_SCREENSHOT", "").strip() == "1":
        return SCREENSHOT
    return REPO_ROOT / "tests" / "artifacts" / "settings-panel.png"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a well-formed PNG: signature, chunk CRCs, IHDR first, IEND last, and image
    data that inflates to exactly one filter byte plus one row of 8-bit pixels per line."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    offset, chunks = 8, []
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind, body = data[offset + 4:offset + 8], data[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in {kind!r}"
        chunks.append((kind, body))
        offset += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, color = struct.unpack(">IIBB", chunks[0][1][:10])
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    assert depth == 8
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert len(pixels) == height * (1 + width * channels)
    return width, height
