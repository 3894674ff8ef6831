"""What a week of running meets (long-run lens): files and servers change under settings that do not.

A CA bundle is rotated in place (same path, another CA) as a server's certificate is renewed: the plugin,
running on, must trust the new CA at once, not the one it read the first time until A0 restarts.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
import trustme
from reliability.kit import LIMIT, QUERY, config_for, make_pool
from reliability.tls_server import tls_server, write_ca_bundle

from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.runtime import rerank_pool

pytestmark = pytest.mark.anyio


async def test_a_ca_bundle_rotated_in_place_is_trusted_at_once(tmp_path: Path) -> None:
    """The server's certificate is renewed under a new CA and the bundle file rewritten with it, settings
    untouched: the next recall verifies against the new CA (it was refused with ``tls`` until a restart)."""
    old_ca, new_ca = trustme.CA(), trustme.CA()
    bundle = write_ca_bundle(old_ca, tmp_path)
    with tls_server("infinity", old_ca) as server:
        config = config_for("infinity", server.url, timeout=5, ca_bundle=str(bundle))
        assert (await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=config)).applied
        await hang_up()
    assert write_ca_bundle(new_ca, tmp_path) == bundle  # rotated in place
    with tls_server("infinity", new_ca) as server:
        renewed = config.replace(endpoint=server.url)
        outcome = await rerank_pool(QUERY, make_pool(), limit=LIMIT, config=renewed)
        assert outcome.applied, outcome.message
        assert server.count() > 0
        await hang_up()


async def hang_up() -> None:
    """Close the client's kept-alive TLS connections before their server goes (a TLS close waits for the peer)."""
    await anyio.to_thread.run_sync(runtime.shutdown)
