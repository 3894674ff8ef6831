"""Security (issue 7): the API key never shows, TLS is verified unless turned off on purpose, the endpoint
is http(s), and document text stays out of the logs.

Everything the plugin can show is captured and searched: every log record (the plugin's logger and the
root logger, at DEBUG), the counters and their JSON form, the recall's outcome, the connection test's
report, the text and repr of every error and config. The servers here try hard to leak: one echoes
the Authorization header into its error body, one echoes the documents.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
import trustme
from aiohttp import web
from reliability.kit import LIMIT, MARK, QUERY, TEXTS, config_for, is_ours, make_pool, on_our_requests, shown_text
from reliability.tls_server import tls_server, write_ca_bundle

from support.deadlines import PATIENT_S
from support.servers import Hang, InvalidJson, Respond, RunningServer
from usr.plugins.a0_reranker.a0_hooks.settings_modal import load_default_settings
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.errors import ConfigError
from usr.plugins.a0_reranker.core.redaction import redact
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

pytestmark = pytest.mark.anyio

SECRET = "sk-live-7f3a9c2e-DO-NOT-LEAK"


@dataclass(frozen=True)
class EchoAuthorization:
    """A careless server: its 401 body repeats the Authorization header it was sent."""

    padding: int = 0  # words before the echo, to push it across the 300-character cut of error text

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        words = "x" * self.padding
        message = f"{words} invalid credentials: {request.headers.get('Authorization', '')}".strip()
        return web.json_response({"error": {"message": message, "type": "authentication_error", "code": 401}},
                                 status=401)


@dataclass(frozen=True)
class EchoDocuments:
    """A server whose validation error quotes the documents it was sent (FastAPI-style detail)."""

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        body = await request.json()
        documents = body.get("documents") or body.get("texts") or body.get("text_2") or []
        detail = [{"loc": ["body", "documents", i], "msg": f"unsupported document {doc!r}"}
                  for i, doc in enumerate(documents)]
        return web.json_response({"detail": detail}, status=422)


def assert_secret_absent(text: str) -> None:
    assert SECRET not in text
    assert SECRET[:12] not in text  # nor the beginning of it (a cut-off echo)


async def recall_and_probe(config: RerankerConfig) -> list[Any]:
    """A recall, the blocking API, and a connection test, with everything each returns."""
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    ranking = await reranker.rerank_async(QUERY, list(TEXTS), config=config)
    report = await runtime.probe_async(config)
    return [outcome, ranking, report, json.dumps(report.as_dict()), config]


async def test_a_working_keyed_server_shows_the_key_nowhere(serve: Any, everything_logged: Any) -> None:
    server: RunningServer = serve("infinity", api_key=SECRET)
    config = config_for("infinity", server.url, api_key=SECRET, timeout=5)
    shown = await recall_and_probe(config)
    assert shown[0].applied and shown[2].ok, shown
    assert all(r.headers["Authorization"] == f"Bearer {SECRET}" for r in server.requests if r.method == "POST")
    assert_secret_absent(shown_text(everything_logged, *shown))


@pytest.mark.parametrize("typed", [f"Bearer {SECRET}", f"bearer  {SECRET}"], ids=["Bearer", "bearer-two-spaces"])
async def test_a_key_typed_with_its_bearer_prefix_is_sent_once_prefixed(serve: Any, typed: str) -> None:
    """Copied from a curl line, the key came with its scheme, and went out as ``Bearer Bearer ...``: refused."""
    server: RunningServer = serve("infinity", api_key=SECRET)
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config_for("infinity", server.url,
                                                                                     api_key=typed, timeout=5))
    assert outcome.applied, outcome
    assert {r.headers["Authorization"] for r in server.requests if r.method == "POST"} == {f"Bearer {SECRET}"}


@pytest.mark.parametrize("padding", [0, 180, 250, 270, 290])
async def test_a_server_echoing_the_key_into_its_error_is_redacted(
        serve: Any, everything_logged: Any, padding: int) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, api_key=SECRET, timeout=5)
    assert (await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)).applied
    server.set_fault(on_our_requests(EchoAuthorization(padding)))
    shown = await recall_and_probe(config)
    assert not shown[0].applied and shown[0].reason == "http_status"
    assert "HTTP 401" in runtime.statistics().last_error  # the server's answer does come through
    assert_secret_absent(shown_text(everything_logged, *shown))


@pytest.mark.parametrize("padding", [0, 270])
async def test_a_key_echoed_during_detection_and_the_connection_test_is_redacted(
        serve: Any, everything_logged: Any, padding: int) -> None:
    server = serve("infinity")
    server.set_fault(EchoAuthorization(padding))  # every request, detection's included
    config = config_for("infinity", server.url, api_key=SECRET, timeout=5)
    shown = await recall_and_probe(config)
    assert not shown[0].applied and not shown[2].ok
    assert "invalid credentials" in shown[3]
    assert_secret_absent(shown_text(everything_logged, *shown))


async def test_a_key_echoed_by_one_replica_is_redacted_in_its_row_of_the_connection_test(
        serve: Any, everything_logged: Any) -> None:
    good, leaky = serve("infinity", api_key=SECRET), serve("infinity")
    leaky.set_fault(EchoAuthorization(270))
    config = config_for("infinity", f"{good.url}, {leaky.url}", api_key=SECRET, timeout=5)
    report = await runtime.probe_async(config)
    assert not report.ok and [r.ok for r in report.replicas] == [True, False]
    assert "invalid credentials" in json.dumps(report.as_dict()["replicas"][1])
    assert_secret_absent(shown_text(everything_logged, report, json.dumps(report.as_dict())))


def test_the_key_is_not_in_a_config_repr_or_a_config_error() -> None:
    config = RerankerConfig(endpoint="http://127.0.0.1:1", api_key=SECRET)
    assert SECRET not in repr(config) and SECRET not in str(config)
    assert config.key_fingerprint and config.key_fingerprint not in SECRET
    with pytest.raises(ConfigError) as bad_type:
        RerankerConfig(api_key=SECRET.encode())  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as bad_other:
        RerankerConfig.from_settings({"rerank_api_key": SECRET, "rerank_timeout": "soon", "rerank_endpoint": "ftp://h"})
    for error in (bad_type.value, bad_other.value):
        assert "rerank_" in str(error)
        assert_secret_absent(f"{error} {error!r} {error.problems}")


def test_redaction_masks_a_secret_cut_off_at_the_end_of_a_shortened_message() -> None:
    assert redact(f"header was Bearer {SECRET[:9]}…", SECRET) == "header was Bearer ***…"
    assert redact(f"key {SECRET} and again {SECRET}", SECRET) == "key *** and again ***"
    assert redact("nothing secret here…", SECRET) == "nothing secret here…"


# --- document text stays out of the logs ---------------------------------------------------------


DOCUMENT_FAULTS = {
    "success": None,
    "echoes_documents": EchoDocuments(),
    "silent": Hang(),
    "broken_json": InvalidJson(),
    "overloaded": Respond(503, {"error": {"message": "overloaded", "type": "Unavailable", "code": 503}}),
}


@pytest.mark.parametrize("fault", sorted(DOCUMENT_FAULTS))
async def test_document_text_is_not_logged(serve: Any, everything_logged: Any, fault: str) -> None:
    server = serve("vllm")
    config = config_for("vllm", server.url, timeout=0.5)
    patient = config.replace(timeout=PATIENT_S)  # for the calls that must be reranked
    assert (await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=patient)).applied
    rule = DOCUMENT_FAULTS[fault]
    server.set_fault(None if rule is None else on_our_requests(rule))
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=patient if rule is None else config)
    assert outcome.applied == (rule is None)
    assert any(is_ours(r) for r in server.requests)
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in everything_logged.records)
    assert MARK not in logged  # every test document carries this word; no part of one was logged
    for text in TEXTS:
        assert text not in logged and text not in runtime.statistics().last_error


# --- TLS --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def test_ca() -> trustme.CA:
    return trustme.CA()


async def hang_up() -> None:
    """Close the client's kept-alive TLS connections before their server goes: a TLS close waits
    for the peer, and a server that stops first would leave its side of them open."""
    await anyio.to_thread.run_sync(runtime.shutdown)


def test_tls_is_verified_by_default_and_turning_it_off_is_an_explicit_setting() -> None:
    assert RerankerConfig().tls_verify is True
    assert load_default_settings()["rerank_tls_verify"] is True
    assert RerankerConfig.from_settings({"rerank_tls_verify": "false"}).tls_verify is False
    assert RerankerConfig.from_settings({}).ca_bundle == ""


async def test_a_self_signed_server_is_refused_by_default(test_ca: trustme.CA) -> None:
    with tls_server("infinity", test_ca) as server:
        config = config_for("infinity", server.url, timeout=5)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
        assert not outcome.applied and outcome.reason == "tls"
        assert "certificate" in outcome.message.lower()
        assert reranker.rerank(QUERY, list(TEXTS), config=config) is None
        report = await runtime.probe_async(config)
        assert not report.ok and "TLS" in report.message
        assert server.requests == []
    assert dict(runtime.statistics().fallbacks) == {"tls": 2}


async def test_the_test_ca_as_a_bundle_makes_it_work(test_ca: trustme.CA, tmp_path: Path) -> None:
    bundle = write_ca_bundle(test_ca, tmp_path)
    with tls_server("infinity", test_ca) as server:
        config = config_for("infinity", server.url, timeout=5, ca_bundle=str(bundle))
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
        assert outcome.applied, outcome.message
        assert (await runtime.probe_async(config)).ok
        (tmp_path / "other").mkdir()
        wrong = write_ca_bundle(trustme.CA(), tmp_path / "other")  # another CA's bundle is no better than none
        refused = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config.replace(ca_bundle=str(wrong)))
        assert refused.reason == "tls"
        await hang_up()


async def test_verification_off_makes_it_work(test_ca: trustme.CA) -> None:
    with tls_server("infinity", test_ca) as server:
        config = config_for("infinity", server.url, timeout=5, tls_verify=False)
        assert (await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)).applied
        await hang_up()


async def test_a_missing_ca_bundle_is_a_settings_error_not_an_exception(test_ca: trustme.CA, tmp_path: Path) -> None:
    with tls_server("infinity", test_ca) as server:
        config = config_for("infinity", server.url, timeout=5, ca_bundle=str(tmp_path / "missing.pem"))
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
        assert not outcome.applied and outcome.reason == "config"
        assert "rerank_ca_bundle" in runtime.statistics().last_error


async def test_a_missing_ca_bundle_stops_detection_at_the_first_route_and_is_reported_once(
        test_ca: trustme.CA, tmp_path: Path) -> None:
    """The bundle is every route's: the probe says it once, not once per route it would have tried."""
    with tls_server("infinity", test_ca) as server:
        config = config_for("infinity", server.url, timeout=5, ca_bundle=str(tmp_path / "missing.pem"))
        report = await runtime.probe_async(config)
        assert not report.ok and "rerank_ca_bundle" in report.message
        assert sum(text.count("rerank_ca_bundle") for text in (report.message, *report.attempts)) == 1, report
        assert server.requests == []


# --- the endpoint must be http(s) ------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", [
    "ftp://reranker.example/rerank", "file:///etc/passwd", "javascript:alert(1)", "ws://127.0.0.1:8000",
    "gopher://127.0.0.1:70", "127.0.0.1:8000", "//127.0.0.1:8000", "http://user:pw@127.0.0.1:8000",
])
def test_an_endpoint_that_is_not_http_is_refused_by_name(endpoint: str) -> None:
    with pytest.raises(ConfigError) as refused:
        RerankerConfig(endpoint=endpoint)
    assert "rerank_endpoint" in str(refused.value)
    assert reranker.rerank(QUERY, list(TEXTS), config={"rerank_endpoint": endpoint}) is None
    assert runtime.statistics().fallbacks.get("config") == 1
