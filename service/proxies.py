"""The forward proxy a request goes through: the one HTTPS_PROXY or HTTP_PROXY names in the environment, unless
NO_PROXY exempts the host (``core.endpoint_url.proxy_exempt``), as curl and requests honour them. Chosen here, not
by aiohttp's ``trust_env``, which also reads ~/.netrc on every request and refuses our Authorization header beside
a netrc entry (docs.aiohttp.org/en/stable/client_advanced.html#proxy-support). The transport keeps each choice
while these variables stay as they are.
"""

from __future__ import annotations

import base64
import urllib.request
from typing import Final
from urllib.parse import urlsplit

from yarl import URL

from ..core.endpoint_url import proxy_exempt
from ..core.errors import ConfigError

PROXY_VARIABLES: Final = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY")
Proxy = tuple[URL | None, dict[str, str]]  # the proxy, and the headers that carry its credentials


def proxy_for(endpoint: str) -> Proxy:
    """The proxy for ``endpoint`` with its ``user:password`` as Proxy-Authorization, or none."""
    parts = urlsplit(endpoint)
    proxies = urllib.request.getproxies_environment()
    named = proxies.get(parts.scheme)
    if not named or proxy_exempt(parts.hostname or "", proxies.get("no", "")):
        return None, {}
    try:
        proxy = URL(named if "://" in named else f"http://{named}")
    except ValueError:
        raise ConfigError([f"{parts.scheme.upper()}_PROXY in the environment is not a valid URL"]) from None
    if proxy.user is None:
        return proxy, {}
    credentials = base64.b64encode(f"{proxy.user}:{proxy.password or ''}".encode()).decode("ascii")
    return proxy.with_user(None), {"Proxy-Authorization": f"Basic {credentials}"}
