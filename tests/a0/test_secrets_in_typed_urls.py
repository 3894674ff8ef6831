"""Secrets a user types into the endpoint field in the odd ways URLs allow never show (secrets, round four).

The status API, the ``reranker_status`` tool, Test connection and the plugin's log, for settings that hold:
an API key in a ``?query`` or a token in a ``#fragment`` (the endpoint is refused, and shown), a password
after a scheme typed with one slash, a password that holds both ``@`` and ``/``, and a token with a ``/``
typed as the user name (``https://TOKEN@host``), which a URL parser reads as a host and a path with an
``@``: such an endpoint must be refused as a user name is, not used (and shown) as a valid one.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from .conftest import A0

pytestmark = pytest.mark.anyio

GOOD = "http://127.0.0.1:1"
# the endpoint as typed, and the secret pieces none of which may show
TYPED: dict[str, tuple[str, tuple[str, ...]]] = {
    "key in the query": ("http://127.0.0.1:2/?api_key=sk-q7Zt93kXw4", ("sk-q7Zt93kXw4", "q7Zt93")),
    "token in the fragment": ("http://127.0.0.1:2/#access_token=tok-Vb82mQx1", ("tok-Vb82mQx1", "Vb82mQ")),
    "one slash after the scheme": ("http:/admin7:hunter2-d3f9@127.0.0.1:2", ("hunter2", "d3f9", "admin7")),
    "@ and / in the password": ("http://admin7:h@nter/2-k8Lq@127.0.0.1:2", ("nter/2", "k8Lq", "admin7")),
    "token with a / as the user name": ("https://tok3n/Zx9vQ+Lm2w@127.0.0.1:2", ("Zx9vQ", "Lm2w", "tok3n")),
    "IPv6 host, password and key": ("http://admin7:pw-r5T2@[::1]:2/?key=sk-w8Pn3", ("pw-r5T2", "r5T2", "w8Pn3")),
    "percent-encoded password": ("http://admin7:p%40ss%2Fk9Zm@127.0.0.1:2", ("p%40ss", "k9Zm", "admin7")),
}


def post(a0: A0, handler: str, body: Any) -> Any:
    return a0.mod("helpers.api").dispatch_plugin_api("a0_reranker", handler, body)


@pytest.mark.parametrize("listed", [False, True], ids=["alone", "second entry"])
@pytest.mark.parametrize("case", TYPED)
async def test_a_secret_typed_into_the_endpoint_shows_nowhere(a0: A0, caplog: pytest.LogCaptureFixture, case: str,
                                                              listed: bool) -> None:
    caplog.set_level(logging.DEBUG)
    typed, pieces = TYPED[case]
    endpoint = f"{GOOD}, {typed}" if listed else typed
    (a0.plugin_dir / "config.json").write_text(json.dumps({"rerank_endpoint": endpoint, "rerank_timeout": 2}),
                                               "utf-8")
    status = await asyncio.to_thread(post, a0, "status", {})
    tool = (await a0.new_agent(profile="").call_tool("reranker_status", {})).message
    tested = await asyncio.to_thread(post, a0, "test_connection", {"config": {"rerank_endpoint": endpoint,
                                                                              "rerank_timeout": "2"}})
    assert status.json()["mode"] == "invalid settings", status.json()  # refused, not used
    assert tested.json()["ok"] is False and "rerank_endpoint" in tested.json()["errors"], tested.json()
    assert status.json()["endpoint"].startswith(f"{GOOD}, " if listed else "http")  # shown, masked
    for text in (status.body, tool, tested.body, caplog.text):
        for piece in pieces:
            assert piece not in text, (piece, text)
