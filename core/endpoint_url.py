"""The endpoint URLs a user types: cleaned of what they may paste with them, and checked without ever raising
or repeating them (they may hold a password). ``rerank_endpoint`` may list several base URLs, replicas of one
model, separated by commas or whitespace; the canonical text joins them with ", ", each once. A comma or space
inside a URL's ``user:password@`` separates nothing: that entry is refused whole, its password masked.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final
from urllib.parse import urlsplit

from .redaction import userinfo_spans, without_url_secrets, without_userinfo

# API paths a user may paste into the endpoint field; the plugin appends the path itself.
_PASTED_API_SUFFIXES: Final = ("/v1/rerank", "/v2/rerank", "/v1/reranking", "/reranking", "/rerank", "/v1/score",
                                "/score", "/v1", "/v2")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
# scheme, then a host (an IPv6 address in brackets) and a port of at most five digits, up to the path;
# no match where a user name, a malformed host or a long port stands: endpoint_problem names those
_ORIGIN: Final = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<host>\[[^\]/?#@]*\]|[^:/?#@\[\]]*)(?::(?P<port>\d{0,5}))?(?=[/?#]|$)"
)
_BEFORE_PATH: Final = re.compile(r".*?://[^/?#]*", re.DOTALL)  # anything up to ``://``, then the authority
_SEPARATORS: Final = re.compile(r"[,\s]+")
LIST_SEPARATOR: Final = ", "
_NOT_IN_URLS: Final = re.compile(r"[\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def normalize_endpoint(endpoint: str) -> str:
    """Trim spaces, trailing slashes and pasted API paths, and spell the server one way (scheme and host in lower
    case, no default port): one server written two ways is one replica. Idempotent, as ``replace`` needs."""
    text = endpoint.strip().rstrip("/")
    before_path = _BEFORE_PATH.match(text)  # a host named ``rerank`` (a compose service on port 80) is no path
    path_start = before_path.end() if before_path else 0
    while suffix := next((s for s in _PASTED_API_SUFFIXES
                          if text.lower().endswith(s) and len(text) - len(s) >= path_start), ""):
        text = text[: -len(suffix)].rstrip("/")
    if (origin := _ORIGIN.match(text)) is None:
        return text
    scheme = origin["scheme"].lower()
    address, percent, zone = origin["host"].partition("%")  # the IPv6 zone keeps its case, as the path does
    digits = origin["port"]
    port = "" if not digits or int(digits) == _DEFAULT_PORTS.get(scheme) else f":{int(digits)}"
    return f"{scheme}://{address.lower()}{percent}{zone}{port}{text[origin.end():]}"


def split_endpoints(text: str) -> tuple[str, ...]:
    urls = (normalize_endpoint(part) for part in endpoint_entries(text))
    return tuple(dict.fromkeys(url for url in urls if url))


def endpoint_entries(text: str) -> list[str]:
    """The entries of an endpoint setting as typed: the text cut at each run of commas and whitespace, except
    one inside a URL's ``user:password@`` (a password typed raw may hold either)."""
    inside = userinfo_spans(text)
    cuts = [run.span() for run in _SEPARATORS.finditer(text)
            if not any(first < run.start() < last for first, last in inside)]
    bounds = [0, *(at for cut in cuts for at in cut), len(text)]
    return [text[start:end] for start, end in zip(bounds[::2], bounds[1::2], strict=True) if start < end]


def shown_endpoints(text: str) -> str:
    """An endpoint setting as shown even when invalid: its entries as typed, joined as the canonical text is (so
    "entry 2" is the second one shown), less any user name and password, ?query and #fragment (where a key may
    be typed). Masked before splitting: a query may hold a comma."""
    return LIST_SEPARATOR.join(endpoint_entries(without_url_secrets(text, all_urls=True)))


def endpoints_problem(text: str) -> str | None:
    """Why an endpoint setting is unusable, naming the entry by position (never by its text)."""
    parts = endpoint_entries(text.strip())
    if len(parts) <= 1:  # a stray comma around one URL is no second entry: split_endpoints drops it too
        return endpoint_problem(parts[0] if parts else "")
    for position, part in enumerate(parts, 1):
        if (problem := endpoint_problem(part)) is not None:
            return f"entry {position} of {len(parts)} {problem}"
    return None


def endpoint_problem(endpoint: str) -> str | None:
    """Why an endpoint is unusable; empty means "not configured"."""
    text = endpoint.strip()
    if not text:
        return None
    if _NOT_IN_URLS.search(without_userinfo(text)):  # a password's spaces: refused below as a password
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
    if "@" in text:  # a path's @ reads as a token typed as a user name: https://TOKEN/WITH/SLASH@host
        return "must not contain @ (a user name or password goes in no URL: put a key in rerank_api_key)"
    if parts.query or parts.fragment or "?" in text or "#" in text:  # an empty one too: paths go after it
        return "must not contain ?query or #fragment"
    try:
        _ = parts.port
    except ValueError:
        return "has an invalid port"
    return None


def proxy_exempt(host: str, no_proxy: str) -> bool:
    """Whether a request to ``host`` goes direct although a proxy is set: a loopback address, which no proxy elsewhere
    can reach (Go's ``http.ProxyFromEnvironment`` exempts it too), or one NO_PROXY names: ``*``, the name or a parent
    domain (with a leading dot or not), an address or a network (``10.0.0.0/8``), as curl and requests read it."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost") or _in_network(host, "127.0.0.0/8") or host == "::1":
        return True
    entries = (entry.strip().lstrip(".").lower() for entry in no_proxy.split(","))
    return any(entry == "*" or host == entry or host.endswith(f".{entry}") or _in_network(host, entry)
               for entry in entries if entry)


def _in_network(host: str, network: str) -> bool:
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(network, strict=False)
    except ValueError:
        return False
