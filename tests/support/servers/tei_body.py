"""TEI's request body as axum's ``Json<RerankRequest>`` extractor sees it.

TEI answers a body without ``texts`` with a 422 text/plain "Failed to deserialize the JSON body ...
missing field `texts`" (axum's ``Json`` rejection). The other rejections are axum's standard ones (plain wording of
axum's): 415 without a JSON content type, 400 for a syntax error, 422 for a wrong type. Serde
reports positions as "line L column C"; we report the end of the body, as serde does for a
missing field (for type errors the real column is that of the bad value).
"""

from __future__ import annotations

from typing import Any

from .wire import is_str_list, parse_json

_DESERIALIZE = "Failed to deserialize the JSON body into the target type"
_FIELDS = ("query", "texts")  # RerankRequest's required fields, in declaration order
_BOOLS = ("raw_scores", "return_text")


class BodyRejected(ValueError):
    """axum refused the body; ``status`` and ``str()`` are its text/plain answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def read_rerank_body(content_type: str, text: str) -> dict[str, Any]:
    """The request as a dict with ``query`` and ``texts``; raise BodyRejected like axum does."""
    if content_type != "application/json":
        raise BodyRejected(415, "Expected request with `Content-Type: application/json`")
    parsed = parse_json(text)
    if not parsed.ok:
        assert parsed.error is not None
        raise BodyRejected(400, f"Failed to parse the request body as JSON: {_position(parsed.error.msg, text)}")
    body = parsed.value
    if not isinstance(body, dict):
        raise BodyRejected(422, f"{_DESERIALIZE}: invalid type: {_kind(body)}, expected struct RerankRequest"
                                f" {_end(text)}")
    for name in _FIELDS:
        if name not in body:
            raise BodyRejected(422, f"{_DESERIALIZE}: missing field `{name}` {_end(text)}")
    _check_types(body, text)
    return body


def _check_types(body: dict[str, Any], text: str) -> None:
    if not isinstance(body["query"], str):
        raise BodyRejected(422, f"{_DESERIALIZE}: query: invalid type: {_kind(body['query'])}, "
                                f"expected a string {_end(text)}")
    texts = body["texts"]
    if not isinstance(texts, list):
        raise BodyRejected(422, f"{_DESERIALIZE}: texts: invalid type: {_kind(texts)}, "
                                f"expected a sequence {_end(text)}")
    if not is_str_list(texts):
        i = next(i for i, item in enumerate(texts) if not isinstance(item, str))
        raise BodyRejected(422, f"{_DESERIALIZE}: texts[{i}]: invalid type: {_kind(texts[i])}, "
                                f"expected a string {_end(text)}")
    for name in _BOOLS:
        if name in body and not isinstance(body[name], bool):
            raise BodyRejected(422, f"{_DESERIALIZE}: {name}: invalid type: {_kind(body[name])}, "
                                    f"expected a boolean {_end(text)}")


def _kind(value: Any) -> str:
    """Serde's description of an unexpected JSON value."""
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value}"'
    if isinstance(value, list):
        return "sequence"
    return "map" if isinstance(value, dict) else "null"


def _end(text: str) -> str:
    lines = text.split("\n")
    return f"at line {len(lines)} column {len(lines[-1])}"


def _position(message: str, text: str) -> str:
    return f"{message.lower()} {_end(text)}"
