"""The settings panel with several replicas in headless Chromium (issue 11, acceptance 5): the endpoint
field takes a list and names a bad entry exactly as core does, a config.json that lists the replicas
loads joined and saves as text, Test connection shows one row per replica, and the live status one
row per server."""

from __future__ import annotations

import re
from typing import Any

import pytest

from support.servers import serve_in_thread
from usr.plugins.a0_reranker.core.endpoint_url import endpoints_problem

from .conftest import A0Root, Panel, goto_host
from .test_settings_panel import expect, open_panel, rerank_a_few

pytestmark = pytest.mark.browser

# what a user may type or paste, the odd cases of urllib.parse.urlsplit included
ENDPOINT_INPUTS = [
    "", "   ", "http://reranker.lan:8002", " http://h:1/v1/rerank/ ", "HTTP://H:80", "http://münchen.de:8002",
    "ftp://files.example.com", "localhost:8000", "http://", "http://:8002", "http:///path", "//h:80",
    "https://user:pw@h", "http://user@h", "http://:@h", "http://@h", "http://user@",
    "http://h/a@b", "https://tok3n/Zx9vQ+Lm2w@h:8000", "http://h:1/x@y?z", "http://a:1, http://h/p@th",
    "http://h?x=1", "http://h#top", "http://h/?", "http://h/#", "http://h:99999", "http://h:8o02", "http://h:65535",
    "http://h:", "http://h:+80", "http://h:٨٠",
    "http://[::1", "http://::1]", "http://[::1]:8002", "http://[127.0.0.1]:80", "http://[fe80::1%eth0]:80",
    "http://[fe80::1%]:80", "http://[v1.x]", "http://[vz.x]", "http://[]", "http://[::1]x:80",
    "http://ex℀ample.com", "http://u:hunter2@[::1", "http://h\u0000x", "http://h\u007fx", "http://h\u0085x",
    "http://a:1, http://b:2", "http://a:1 http://b:2\nhttp://c:3", "http://a:1,,http://b:2", ",http://a:1,", "http://a:1,",
    ", , ftp://a", ", http://h\u0000x",
    "http://a:1, ftp://b", "http://a:1, http://u:p@b, ftp://c", "http://a, localhost:8000",
    "http://a:1,http://a:1", "http://a\u3000http://b", "http://a\u001chttp://b", "http://a, http://[::1",
    "http://a, http://b?x", "http://a, http://b:70000", "http://a, http://ex℀ample.com",
    # a password typed raw holds spaces or commas: they separate no entries
    "http://user:pa ss@host:8000", "http://a:1 http://u:p ss@b:2", "http://u:p,s s@h", "u:p s@h:8000",
    "http://us er:p w@h", "http://a:1, u:p@b", "http://u:p\u3000s@h", "http://h:٨٠ u:p@x", "http://u:p s@[::1",
    " , http://u:p s@h ,", "http://u:p s@h x", "http://h1, h2:8000 u:p@h3",
]


def core_message(text: str) -> str:
    """What the panel must say, from core's own check: the same predicate, the field named as the panel names it."""
    problem = endpoints_problem(text)
    if problem is None:
        return ""
    problem = problem.replace("rerank_api_key", "API key")
    return f"{problem[0].upper()}{problem[1:]}." if problem.startswith("entry ") else f"The URL {problem}."


def panel_messages(panel: Panel, inputs: list[str]) -> list[str]:
    return panel.page.evaluate(
        """async (inputs) => {
             const checks = await import('/plugins/a0_reranker/webui/reranker-endpoint.js');
             return inputs.map(checks.endpointProblem);
           }""",
        inputs,
    )


def test_the_panels_endpoint_check_says_what_core_says(panel: Panel) -> None:
    goto_host(panel)
    expected = [core_message(text) for text in ENDPOINT_INPUTS]
    assert dict(zip(ENDPOINT_INPUTS, panel_messages(panel, ENDPOINT_INPUTS), strict=True)) == dict(
        zip(ENDPOINT_INPUTS, expected, strict=True))
    assert sum(1 for message in expected if message.startswith("Entry ")) >= 8  # the list cases do name entries
    assert sum(1 for message in expected if not message) >= 10  # and good lists pass


def test_several_urls_are_accepted_and_a_bad_entry_is_named(panel: Panel) -> None:
    open_panel(panel)
    panel.fill("rerank_endpoint", "http://gpu-1.lan:8002, http://gpu-2.lan:8002 http://gpu-3.lan:8002")
    expect(panel.problem("rerank_endpoint")).to_be_hidden()
    panel.fill("rerank_endpoint", "http://gpu-1.lan:8002, gpu-2.lan:8002, http://u:secret@gpu-3.lan:8002")
    expect(panel.problem("rerank_endpoint")).to_have_text("Entry 2 of 3 must start with http:// or https://.")
    expect(panel.control("rerank_endpoint")).to_have_class(re.compile(r"\ba0r-invalid\b"))
    panel.fill("rerank_endpoint", "http://gpu-1.lan:8002, http://gpu-2.lan:8002, http://u:secret@gpu-3.lan:8002")
    expect(panel.problem("rerank_endpoint")).to_have_text(
        "Entry 3 of 3 must not contain a user name or password (put a key in API key).")
    assert "secret" not in panel.problem("rerank_endpoint").inner_text()
    panel.test_button().click()
    expect(panel.test_result()).to_contain_text("Fix this setting first: Reranker endpoint. Nothing was sent.")
    assert panel.host.plugin_calls("test_connection") == []


def test_a_config_json_that_lists_the_replicas_loads_joined_and_saves_as_text(panel: Panel, a0_root: A0Root) -> None:
    listed = ["http://gpu-1.lan:8002", "http://gpu-2.lan:8002/v1/rerank"]
    a0_root.save_global_config({"rerank_endpoint": listed, "rerank_timeout": 5})
    open_panel(panel)
    expect(panel.control("rerank_endpoint")).to_have_value("http://gpu-1.lan:8002, http://gpu-2.lan:8002/v1/rerank")
    expect(panel.problem("rerank_endpoint")).to_be_hidden()
    unsaved = "() => Alpine.$data(document.querySelector('.a0r-panel')).modal.hasUnsavedChanges"
    assert panel.page.evaluate(unsaved) is False  # the same replicas, written as the field holds them
    panel.fill("rerank_max_concurrency", "8")
    panel.page.locator(".modal-footer .btn-ok").click()  # A0's Save
    panel.page.locator(".a0r-panel").wait_for(state="detached")
    saved = a0_root.saved_config() or {}
    assert saved["rerank_endpoint"] == "http://gpu-1.lan:8002, http://gpu-2.lan:8002/v1/rerank"
    assert saved["rerank_max_concurrency"] == 8
    config = a0_root.plugin("core.config").RerankerConfig.from_settings(saved)
    assert config.endpoints == ("http://gpu-1.lan:8002", "http://gpu-2.lan:8002")  # what the plugin reads


def replica_row(panel: Panel, position: int) -> Any:
    return panel.page.locator(f'.a0r-replica[data-replica="{position}"]')


def cell(row: Any, column: str) -> str:
    return str(row.locator(f'[data-col="{column}"]').inner_text())


def test_test_connection_shows_one_row_per_replica(panel: Panel) -> None:
    with serve_in_thread("infinity") as gone:
        dead = gone.url
    with serve_in_thread("infinity") as first, serve_in_thread("vllm_qwen3") as second:
        open_panel(panel)
        panel.fill("rerank_endpoint", f"{first.url}, {second.url}, {dead}")
        panel.fill("rerank_timeout", "5")
        panel.test_button().click()
        expect(panel.test_result()).to_have_attribute("data-ok", "false")
        expect(panel.page.locator(".a0r-test-headline")).to_contain_text("2 of 3 replicas rank correctly")
        expect(panel.test_result().locator(".a0r-replica")).to_have_count(3)
        expected = {1: (first.url, "rerank", "/rerank", "infinity"), 2: (second.url, "qwen3_score", "/score", "vllm")}
        for position, (url, api, path, server) in expected.items():
            row = replica_row(panel, position)
            expect(row).to_have_attribute("data-ok", "true")
            assert (cell(row, "url"), cell(row, "api"), cell(row, "path"), cell(row, "server")) == (url, api, path,
                                                                                                    server)
            assert cell(row, "result") == "✓ ranks correctly" and float(cell(row, "margin")) > 0
            assert re.fullmatch(r"[\d.,]+ ms", cell(row, "latency"))
            expect(row.locator('[data-col="error"]')).to_be_hidden()
        down = replica_row(panel, 3)
        expect(down).to_have_attribute("data-ok", "false")
        assert cell(down, "url") == dead and cell(down, "result") == "✗ not working" and cell(down, "api") == "–"
        assert re.search(r"^Not working: .*connect", cell(down, "error"))
        assert panel.test_result().locator(".a0r-fact").count() == 0  # the rows say it, not one server's facts
        toast = panel.toasts()[-1]
        assert toast["type"] == "error" and f"failing: replica 3 {dead} (not working)" in toast["message"]

        panel.fill("rerank_endpoint", f"{first.url} {second.url}")
        panel.test_button().click()
        expect(panel.test_result()).to_have_attribute("data-ok", "true")
    expect(panel.page.locator(".a0r-test-headline")).to_contain_text("All 2 replicas rank correctly")
    expect(panel.test_result().locator(".a0r-replica")).to_have_count(2)
    toast = panel.toasts()[-1]
    assert toast["type"] == "success"
    assert re.fullmatch(r"All 2 replicas rank correctly \(smallest margin \+0\.\d\d, slowest \d+ ms\)\.",
                        toast["message"]), toast
    sent = [call.body["config"]["rerank_endpoint"] for call in panel.host.plugin_calls("test_connection")]
    assert sent == [f"{first.url}, {second.url}, {dead}", f"{first.url} {second.url}"]


def test_live_status_shows_each_server(panel: Panel, a0_root: A0Root) -> None:
    """Two replicas that answer and one that refuses connections: its breaker ejects it, the others
    share the pairs, and the table follows the counters as they change."""
    with serve_in_thread("infinity") as gone:
        dead = gone.url
    settings = {"rerank_timeout": 5, "rerank_breaker_failures": 1, "rerank_breaker_cooldown": 600}
    with serve_in_thread("infinity") as first, serve_in_thread("infinity") as second:
        endpoint = f"{first.url}, {second.url}, {dead}"
        rerank_a_few(a0_root, endpoint, **settings)
        a0_root.save_global_config({"rerank_endpoint": endpoint, **settings})
        panel.page.clock.install()
        open_panel(panel)
        expect(panel.page.locator('[data-stat="servers"] .a0r-server')).to_have_count(3)
        shares = shown_shares(panel, a0_root, first.url, second.url)
        assert 99 <= sum(shares) <= 101
        ejected = server_row(panel, dead)
        assert (cell(ejected, "state"), cell(ejected, "breaker"), cell(ejected, "share")) == ("ejected", "open",
                                                                                             "0% (0)")
        assert cell(ejected, "latency") == "–" and "a0r-bad" in (ejected.locator('[data-col="state"]')
                                                                .get_attribute("class") or "")
        before = a0_root.plugin("service.runtime").statistics().pairs_scored
        rerank_a_few(a0_root, endpoint, **settings)
        panel.page.clock.fast_forward(3_500)
        expect(panel.stat("reranked").locator(".a0r-tile-value")).to_have_text("6 of 6")
    assert a0_root.plugin("service.runtime").statistics().pairs_scored > before
    assert 99 <= sum(shown_shares(panel, a0_root, first.url, second.url)) <= 101
    expect(panel.stat("breakers").locator(".a0r-breaker")).to_have_count(3)


def shown_shares(panel: Panel, a0_root: A0Root, *urls: str) -> list[int]:
    """Each server's share in percent, its row in rotation and its pairs as the counters have them."""
    stats = {r.url: r for r in a0_root.plugin("service.runtime").statistics().replicas}
    shares = []
    for url in urls:
        row = server_row(panel, url)
        assert (cell(row, "url"), cell(row, "state"), cell(row, "breaker")) == (url, "in rotation", "closed")
        assert re.fullmatch(r"\d+", cell(row, "in-flight")) and re.fullmatch(r"[\d.,]+ ms|–", cell(row, "latency"))
        share = re.fullmatch(rf"(\d+)% \({stats[url].pairs}\)", cell(row, "share"))
        assert share, (cell(row, "share"), stats[url])
        shares.append(int(share.group(1)))
    return shares


def server_row(panel: Panel, url: str) -> Any:
    return panel.page.locator(f'.a0r-server[data-endpoint="{url}"]')


def test_the_breaker_tile_lists_the_servers_in_the_tables_order(panel: Panel, a0_root: A0Root) -> None:
    """The tile sorted its endpoints by name while the table follows the list: listed against their
    alphabetical order, both now follow the list."""
    with serve_in_thread("infinity") as one, serve_in_thread("infinity") as two:
        listed = sorted([one.url, two.url], reverse=True)  # not the order a sort by name gives
        endpoint = ", ".join(listed)
        rerank_a_few(a0_root, endpoint)
        a0_root.save_global_config({"rerank_endpoint": endpoint})
        open_panel(panel)
        expect(panel.page.locator('[data-stat="servers"] .a0r-server')).to_have_count(2)
    table = panel.page.locator(".a0r-server").evaluate_all("rows => rows.map(r => r.dataset.endpoint)")
    tile = panel.stat("breakers").locator(".a0r-breaker").evaluate_all("items => items.map(i => i.dataset.endpoint)")
    assert table == listed and tile == listed
