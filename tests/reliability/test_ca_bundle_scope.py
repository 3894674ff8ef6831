"""The CA bundle (``rerank_ca_bundle``) is read only for an ``https://`` request: a bundle that no longer loads
(moved, mistyped) must not stop reranking against a plain ``http://`` server that would never use it, while an
``https://`` server under the same settings still reports it by name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
import trustme
from reliability.kit import LIMIT, QUERY, TEXTS, config_for, make_pool, shown_text
from reliability.proxy_kit import LAN_NAME, without_proxy_variables
from reliability.tls_server import tls_server

from support.outages import closed_port_url
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

pytestmark = pytest.mark.anyio

SECRET = "sk-live-5b1e0d4a-BUNDLE-NOT-LEAKED"


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield from without_proxy_variables(monkeypatch)


async def test_a_bundle_that_does_not_load_leaves_a_plain_http_server_working(serve: Any, tmp_path: Path) -> None:
    server = serve("infinity")
    config = config_for("infinity", server.url, timeout=5, ca_bundle=str(tmp_path / "moved.pem"))
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    assert outcome.applied, outcome.message
    assert await reranker.rerank_async(QUERY, list(TEXTS), config=config) is not None
    report = await runtime.probe_async(config)
    assert report.ok, report.message
    assert "rerank_ca_bundle" not in json.dumps(report.as_dict())
    assert "config" not in dict(runtime.statistics().fallbacks)


async def test_among_mixed_replicas_only_the_https_one_reports_the_bundle(
        serve: Any, everything_logged: Any, tmp_path: Path) -> None:
    plain = serve("infinity", api_key=SECRET)
    with tls_server("infinity", trustme.CA()) as secure:
        config = config_for("infinity", f"{plain.url}, {secure.url}", api_key=SECRET, timeout=5,
                            ca_bundle=str(tmp_path / "typo.pem"))
        report = await runtime.probe_async(config)
        rows = report.as_dict()["replicas"]
        assert [r.ok for r in report.replicas] == [True, False], rows
        assert "rerank_ca_bundle" not in json.dumps(rows[0])
        assert "rerank_ca_bundle" in json.dumps(rows[1])
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
        assert outcome.applied, outcome.message  # the http replica serves the recall
        assert secure.requests == []  # nothing went out to the https one without its bundle
        await anyio.to_thread.run_sync(runtime.shutdown)
    shown = shown_text(everything_logged, report, json.dumps(report.as_dict()), outcome)
    assert SECRET not in shown and SECRET[:12] not in shown


async def test_plain_http_through_an_https_proxy_still_needs_the_bundle(
        environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """aiohttp verifies an https:// proxy with the request's own TLS settings: the bundle is read for it too."""
    environment.setenv("HTTP_PROXY", closed_port_url().replace("http:", "https:"))
    config = config_for("infinity", f"http://{LAN_NAME}:7997", timeout=5, ca_bundle=str(tmp_path / "moved.pem"))
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    assert not outcome.applied and outcome.reason == "config", outcome.message
    assert "rerank_ca_bundle" in runtime.statistics().last_error
