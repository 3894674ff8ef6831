"""The endpoint URL a user types: cleaned of what they may paste with it, and checked without ever
raising (``urlsplit`` raises on malformed hosts) or repeating it (it may hold a user name and password).

``rerank_endpoint`` may list several base URLs, replicas of one model: separated by commas or
whitespace in one text, or a YAML/JSON list. Each is cleaned and checked on its own, the same URL
twice counts once, and the canonical text joins them with ", " (one URL stays exactly one URL).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from .redaction import without_userinfo

# API paths a user may paste into the endpoint field; the plugin appends the path itself.
_PASTED_API_SUFFIXES: Final = (
    "/v1/rerank", "/v2/rerank", "/v1/reranking", "/reranking", "/rerank", "/v1/score", "/score", "/v1", "/v2",
)


def normalize_endpoint(endpoint: str) -> str:
    """Trim spaces, trailing slashes and pasted API paths, so ``http://h:8002/v1/rerank`` works too.
    Idempotent: a config built from a normalized endpoint (``replace``) keeps it as it is."""
    text = endpoint.strip().rstrip("/")
    while suffix := next((s for s in _PASTED_API_SUFFIXES if text.lower().endswith(s)), ""):
        text = text[: -len(suffix)].rstrip("/")
    return text


_SEPARATORS: Final = re.compile(r"[,\s]+")
LIST_SEPARATOR: Final = ", "


def split_endpoints(text: str) -> tuple[str, ...]:
    """The URLs of an endpoint setting, cleaned, in order, each once."""
    urls = (normalize_endpoint(part) for part in _SEPARATORS.split(text))
    return tuple(dict.fromkeys(url for url in urls if url))


def normalize_endpoints(text: str) -> str:
    return LIST_SEPARATOR.join(split_endpoints(text))


def shown_endpoints(text: str) -> str:
    """An endpoint setting as it may be shown even when it is invalid: its entries as typed, one line,
    joined as the canonical text is (so "entry 2" is the second one shown), less any user name and
    password. Never raises."""
    return LIST_SEPARATOR.join(part for part in _SEPARATORS.split(without_userinfo(text)) if part)


def endpoints_problem(text: str) -> str | None:
    """Why an endpoint setting is unusable, naming the entry (by position, never by its text) when it
    lists several URLs. Never raises."""
    parts = [part for part in _SEPARATORS.split(text.strip()) if part]
    if len(parts) <= 1:  # a stray comma around one URL is no second entry: split_endpoints drops it too
        return endpoint_problem(parts[0] if parts else "")
    for position, part in enumerate(parts, 1):
        if (problem := endpoint_problem(part)) is not None:
            return f"entry {position} of {len(parts)} {problem}"
    return None


_NOT_IN_URLS: Final = re.compile(r"[\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def endpoint_problem(endpoint: str) -> str | None:
    """Why an endpoint is unusable, or None. Empty is allowed: it means "not configured".

    Never raises: what ``urlsplit`` cannot read is named as a problem too. No message repeats the URL,
    which may hold a user name and password.
    """
    text = endpoint.strip()
    if not text:
        return None
    if _NOT_IN_URLS.search(text):
        return "must not contain spaces, line breaks or other control characters"
    try:
        parts = urlsplit(text)
    except ValueError:
        return ("has a malformed host: an IPv6 address goes in [brackets], an IPv4 address or a host name "
                "without them, and a host name has only letters, digits, dots and hyphens")
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "has no host name"
    if parts.username or parts.password:
        return "must not contain a user name or password (put a key in rerank_api_key)"
    if parts.query or parts.fragment:
        return "must not contain ?query or #fragment"
    try:
        _ = parts.port
    except ValueError:
        return "has an invalid port"
    return None
