"""Secrets in the engine's odd corners (secrets, round four): what a recall, the blocking API and a connection
test return, the counters and every log record, searched for

- a key typed with its ``Bearer`` prefix (any case, any spacing), which a server echoes bare: the prefix must
  not shield the token from the masking;
- a ``user:password@`` in the ``Location`` of a redirect the server answers with, or in a URL its error quotes
  (a proxy naming the upstream it could not reach), and a token in the query of a relative ``Location`` (a path,
  or ``//host/path``: RFC 9110 allows any URI reference there);
- a password, or a key in a URL's query, nested in a bad setting value (a list, a dict, bytes), which the
  settings error quotes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from reliability.kit import LIMIT, QUERY, TEXTS, config_for, make_pool, on_our_requests, shown_text

from support.servers import Redirect
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.errors import ConfigError
from usr.plugins.a0_reranker.helpers import reranker
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

pytestmark = pytest.mark.anyio

TOKEN = "k3y-7Zq9x2"  # short: shorter than the 16 characters a partial quote must run to


@dataclass(frozen=True)
class EchoBareToken:
    """A 401 naming the token it read: the Authorization header's last word, without its scheme."""

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        token = (request.headers.get("Authorization", "").split() or [""])[-1]
        return web.json_response({"error": {"message": f"invalid API key '{token}'", "type": "authentication_error",
                                            "code": 401}}, status=401)


async def everything_returned(config: RerankerConfig) -> list[Any]:
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    ranking = await reranker.rerank_async(QUERY, list(TEXTS), config=config)
    report = await runtime.probe_async(config)
    return [outcome, outcome.message, ranking, report, json.dumps(report.as_dict())]


@pytest.mark.parametrize("typed", [f"Bearer {TOKEN}", f"bearer   {TOKEN}", f"  BEARER {TOKEN} "],
                         ids=["Bearer", "lower case, spaced", "upper case, padded"])
async def test_a_key_typed_with_its_bearer_prefix_and_echoed_bare_is_masked(
        serve: Any, everything_logged: Any, typed: str) -> None:
    server = serve("infinity")
    server.set_fault(EchoBareToken())  # every request, detection's and the probe's too
    config = config_for("infinity", server.url, api_key=typed, timeout=5)
    shown = await everything_returned(config)
    assert not shown[0].applied and "invalid API key" in shown[1] and "invalid API key" in shown[4], shown
    text = shown_text(everything_logged, *shown)
    assert TOKEN not in text and "7Zq9x2" not in text, text


async def test_a_password_in_a_redirects_location_is_masked(serve: Any, everything_logged: Any) -> None:
    server = serve("infinity")
    config = config_for("infinity", server.url, timeout=5)
    assert (await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)).applied
    server.set_fault(on_our_requests(Redirect("http://admin7:hunter2-c8e1@elsewhere.invalid/rerank?token=t0k-9Qz")))
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    server.set_fault(Redirect("http://admin7:hunter2-c8e1@elsewhere.invalid/?token=t0k-9Qz"))
    report = await runtime.probe_async(config)
    assert outcome.reason == "connect" and "redirected to http://***@elsewhere.invalid/" in outcome.message, outcome
    assert "redirected" in json.dumps(report.as_dict()), report
    text = shown_text(everything_logged, outcome, outcome.message, report, json.dumps(report.as_dict()))
    for piece in ("hunter2", "c8e1", "admin7", "t0k-9Qz"):
        assert piece not in text, text


@pytest.mark.parametrize("location", ["/sso/login?session_token=t0k-9Qz", "//sso.example.invalid/login?s=t0k-9Qz"],
                         ids=["path", "network-path"])
async def test_a_token_in_a_relative_redirects_query_is_masked(serve: Any, everything_logged: Any,
                                                               location: str) -> None:
    server = serve("infinity")
    config = config_for("infinity", server.url, timeout=5)
    assert (await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)).applied
    server.set_fault(on_our_requests(Redirect(location)))
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    server.set_fault(Redirect(location))
    report = await runtime.probe_async(config)
    assert outcome.reason == "connect" and "redirected to " in outcome.message, outcome
    assert "redirected" in json.dumps(report.as_dict()), report
    text = shown_text(everything_logged, outcome, outcome.message, report, json.dumps(report.as_dict()),
                      runtime.statistics().last_error)
    assert "t0k-9Qz" not in text, text


@dataclass(frozen=True)
class QuoteUpstream:
    """A proxy's 502 naming the upstream it could not reach, its URL's password and all (as LiteLLM's do)."""

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        message = "upstream http://svc-admin:upstream-pw-6Jr4@10.0.0.5:9000/rerank refused the connection"
        return web.json_response({"error": {"message": message, "type": "APIConnectionError", "code": 502}},
                                 status=502)


async def test_a_password_in_a_url_a_server_quotes_is_masked(serve: Any, everything_logged: Any) -> None:
    server = serve("infinity")
    config = config_for("infinity", server.url, timeout=5, max_retries=0)
    assert (await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)).applied
    server.set_fault(on_our_requests(QuoteUpstream()))
    outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)
    server.set_fault(QuoteUpstream())
    report = await runtime.probe_async(config)
    assert "upstream http://***@10.0.0.5:9000/rerank refused" in outcome.message, outcome
    assert "upstream http://***@10.0.0.5:9000/rerank refused" in json.dumps(report.as_dict()), report
    text = shown_text(everything_logged, outcome, report, json.dumps(report.as_dict()))
    assert "upstream-pw" not in text and "6Jr4" not in text and "svc-admin" not in text, text


NESTED = {
    "a list": ["http://admin7:hunter2-c8e1@127.0.0.1:1"],
    "a dict": {"url": "http://admin7:hunter2-c8e1@127.0.0.1:1"},
    "a long tuple": ("x" * 80 + " http://admin7:hunter2-c8e1@127.0.0.1:1",),
    "a query in another field": "http://127.0.0.1:1/?api_key=sk-hunter2-c8e1",
}


@pytest.mark.parametrize("case", NESTED)
async def test_a_secret_nested_in_a_bad_setting_value_shows_nowhere(everything_logged: Any, case: str) -> None:
    settings = {"rerank_endpoint": "http://127.0.0.1:1", "rerank_timeout": NESTED[case]}
    if case == "a query in another field":
        settings = {"rerank_endpoint": "http://127.0.0.1:1", "rerank_api": NESTED[case]}
    assert reranker.rerank(QUERY, list(TEXTS), config=settings) is None
    assert await reranker.rerank_async(QUERY, list(TEXTS), config=settings) is None
    with pytest.raises(ConfigError) as refused:
        RerankerConfig.from_settings(settings)
    stats = runtime.statistics()
    assert stats.fallbacks.get("config") == 2 and "rerank_" in stats.last_error, stats
    text = shown_text(everything_logged, str(refused.value), refused.value.problems)
    assert "hunter2" not in text and "c8e1" not in text and "admin7" not in text, text


@pytest.mark.parametrize("value", [b"http://admin7:hunter2-c8e1@127.0.0.1:1",
                                   ["http://admin7:hunter2-c8e1@127.0.0.1:1"]], ids=["bytes", "a list"])
def test_a_config_built_in_code_names_no_password_of_a_value_of_the_wrong_type(value: Any) -> None:
    with pytest.raises(ConfigError) as refused:
        RerankerConfig(endpoint=value)
    text = f"{refused.value} {refused.value!r} {refused.value.problems}"
    assert "rerank_endpoint: expected str" in text and "hunter2" not in text and "admin7" not in text, text
