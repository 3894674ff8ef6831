"""The LiteLLM-proxy test server answers as LiteLLM does (facts and sources in its module docstring):
Cohere's rerank body on three routes, the OpenAI listing with ``owned_by: "openai"``, and the proxy's
``{"error": {"message", "type", "param", "code"}}`` answers with their status codes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from support.servers import RunningServer, start_server

pytestmark = pytest.mark.anyio

MASTER_KEY = "sk-master-4b1d"
QUERY = "What is the capital city of Germany?"
DOCS = ["Bananas are rich in potassium.", "Berlin is the capital of Germany.", "The Nile is a river in Africa."]
BODY = {"model": "rerank-english-v3.0", "query": QUERY, "documents": DOCS}


@asynccontextmanager
async def proxy(**options: Any) -> AsyncIterator[RunningServer]:
    server = await start_server("litellm", **options)
    try:
        yield server
    finally:
        await server.close()


async def send(method: str, url: str, *, body: Any = None, raw: str | None = None,
               headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    kwargs: dict[str, Any] = {"headers": headers or {}}
    if raw is not None:
        kwargs["data"] = raw
        kwargs["headers"] = {"Content-Type": "application/json", **kwargs["headers"]}
    elif body is not None:
        kwargs["json"] = body
    async with aiohttp.ClientSession() as session, session.request(method, url, **kwargs) as answer:
        return answer.status, json.loads(await answer.text()), dict(answer.headers)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank", "/v2/rerank"])
async def test_every_rerank_route_answers_in_cohere_shape(path: str) -> None:
    async with proxy() as srv:
        status, answer, headers = await send("POST", srv.url + path, body={**BODY, "top_n": 2})
    assert status == 200 and list(answer) == ["id", "results", "meta"]
    assert answer["results"][0]["index"] == 1
    assert len(answer["results"]) == 2 and all(set(r) == {"index", "relevance_score"} for r in answer["results"])
    scores = [r["relevance_score"] for r in answer["results"]]
    assert scores == sorted(scores, reverse=True)
    assert answer["meta"]["billed_units"] == {"search_units": 1}
    assert "x-litellm-call-id" in headers


async def test_documents_come_back_only_when_asked() -> None:
    async with proxy() as srv:
        _, answer, _ = await send("POST", srv.url + "/rerank", body={**BODY, "return_documents": True})
    assert answer["results"][0]["document"] == {"text": DOCS[1]}


@pytest.mark.parametrize("path", ["/v1/models", "/models"])
async def test_the_listing_names_the_model_names_and_says_openai(path: str) -> None:
    async with proxy(models=("my-reranker", "gpt-4o")) as srv:
        status, answer, _ = await send("GET", srv.url + path)
    assert status == 200 and list(answer) == ["data", "object"] and answer["object"] == "list"
    assert answer["data"] == [
        {"id": "my-reranker", "object": "model", "created": 1677610602, "owned_by": "openai"},
        {"id": "gpt-4o", "object": "model", "created": 1677610602, "owned_by": "openai"},
    ]


async def test_a_missing_key_and_a_malformed_header_are_401_auth_errors() -> None:
    async with proxy(api_key=MASTER_KEY) as srv:
        missing = await send("POST", srv.url + "/rerank", body=BODY)
        listing = await send("GET", srv.url + "/v1/models")
        malformed = await send("POST", srv.url + "/rerank", body=BODY, headers={"Authorization": MASTER_KEY})
        good = await send("POST", srv.url + "/rerank", body=BODY, headers=bearer(MASTER_KEY))
    expected = {"message": "Authentication Error, No api key passed in.", "type": "auth_error",
                "param": "None", "code": "401"}
    assert missing[:2] == (401, {"error": expected}) and listing[:2] == (401, {"error": expected})
    assert malformed[0] == 401 and malformed[1]["error"]["message"].startswith(
        "Authentication Error, Malformed API Key passed in.")
    assert good[0] == 200


async def test_a_wrong_key_without_a_key_database_is_400_no_connected_db() -> None:
    async with proxy(api_key=MASTER_KEY) as srv:
        status, answer, _ = await send("POST", srv.url + "/v1/rerank", body=BODY, headers=bearer("sk-wrong-1"))
    assert (status, answer) == (400, {"error": {"message": "No connected db.", "type": "no_db_connection",
                                                "param": None, "code": "400"}})


async def test_a_legacy_proxy_echoes_a_wrong_key_in_its_401() -> None:
    async with proxy(api_key=MASTER_KEY, auth_style="legacy") as srv:
        plain = await send("POST", srv.url + "/rerank", body=BODY, headers=bearer("wrong-key-2"))
        prefixed = await send("POST", srv.url + "/rerank", body=BODY, headers=bearer("sk-wrong-3"))
    assert plain[0] == 401 and plain[1]["error"]["message"] == (
        "Authentication Error, LiteLLM Virtual Key expected. Received=wrong-key-2, expected to start with 'sk-'.")
    assert prefixed[0] == 401 and prefixed[1]["error"]["message"] == "Authentication Error, No connected db."


@pytest.mark.parametrize("missing", ["query", "documents", "model"])
async def test_a_missing_parameter_is_named(missing: str) -> None:
    body = {k: v for k, v in BODY.items() if k != missing}
    async with proxy() as srv:
        status, answer, _ = await send("POST", srv.url + "/rerank", body=body)
    assert (status, answer) == (400, {"error": {"message": f"/rerank: Missing required parameter: '{missing}'.",
                                                "type": "invalid_request_error", "param": missing, "code": "400"}})


async def test_an_unknown_model_is_400_with_the_listing_hint() -> None:
    async with proxy() as srv:
        status, answer, _ = await send("POST", srv.url + "/rerank", body={**BODY, "model": "nope"})
    assert status == 400 and answer["error"]["param"] is None and answer["error"]["code"] == "400"
    assert answer["error"]["message"] == ("400: {'error': '/rerank: Invalid model name passed in model=nope. "
                                          "Call `/v1/models` to view available models for your key.'}")


async def test_a_body_that_is_not_json_is_a_500() -> None:
    async with proxy() as srv:
        status, answer, _ = await send("POST", srv.url + "/rerank", raw='{"query": "unterminated')
    assert status == 500 and answer["error"]["type"] == "internal_server_error" and answer["error"]["code"] == "500"


async def test_unknown_routes_are_fastapi_404_without_an_auth_check() -> None:
    async with proxy(api_key=MASTER_KEY) as srv:
        missing = await send("GET", srv.url + "/info")
        method = await send("GET", srv.url + "/rerank", headers=bearer(MASTER_KEY))
        alive = await send("GET", srv.url + "/health/liveliness")
    assert missing[:2] == (404, {"detail": "Not Found"})
    assert method[:2] == (405, {"detail": "Method Not Allowed"})
    assert alive[:2] == (200, "I'm alive!")
