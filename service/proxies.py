"""The forward proxy a request goes through: HTTPS_PROXY or HTTP_PROXY, else ALL_PROXY (a scheme's own variable
wins, as curl, httpx and requests read them), unless NO_PROXY exempts the host. Chosen here, not by aiohttp's
``trust_env``, which also reads ~/.netrc on every request and refuses our Authorization header beside a netrc entry
(docs.aiohttp.org/en/stable/client_advanced.html#proxy-support). A socks proxy is refused by name: aiohttp would
speak HTTP to it, and going around it would bypass the network's policy.
"""

from __future__ import annotations

import base64
import os
import urllib.request
from typing import Final
from urllib.parse import SplitResult, urlsplit

from yarl import URL

from ..core.endpoint_url import proxy_exempt
from ..core.errors import ConfigError

PROXY_VARIABLES: Final = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY",
                          "no_proxy", "NO_PROXY")
Proxy = tuple[URL | None, dict[str, str]]  # the proxy, and the headers that carry its credentials


def proxy_for(endpoint: str) -> Proxy:
    """The proxy, its ``user:password`` as Proxy-Authorization, or none."""
    parts = urlsplit(endpoint)
    proxies = urllib.request.getproxies_environment()  # lower case first, as curl and requests read them
    scheme = parts.scheme if proxies.get(parts.scheme) else "all"
    named = proxies.get(scheme)
    if not named or proxy_exempt(parts.hostname or "", proxies.get("no", "")):
        return None, {}
    lower = f"{scheme}_proxy"  # the variable named in errors: the lower-case one wins where both are set
    proxy = _proxy_url(named, lower if os.environ.get(lower) == named else lower.upper(), parts)
    if proxy.user is None:
        return proxy, {}
    credentials = base64.b64encode(f"{proxy.user}:{proxy.password or ''}".encode()).decode("ascii")
    return proxy.with_user(None), {"Proxy-Authorization": f"Basic {credentials}"}


def _proxy_url(named: str, variable: str, endpoint: SplitResult) -> URL:
    """A ``ConfigError`` names the variable, never its password."""
    try:
        proxy = URL(named if "://" in named else f"http://{named}")
    except ValueError:
        raise ConfigError([f"{variable} in the environment is not a valid URL"]) from None
    if proxy.scheme.startswith("socks"):  # the host and port alone: the URL's user and password never show
        raise ConfigError([f"{variable} in the environment names a {proxy.scheme}:// proxy "
                           f"({proxy.host_port_subcomponent}):"
                           f" socks proxies are not supported; set {endpoint.scheme.upper()}_PROXY to an http:// proxy,"
                           f" or add {endpoint.hostname} to NO_PROXY to reach it directly"])
    return proxy
