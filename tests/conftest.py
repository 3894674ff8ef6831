"""Session set-up: the A0 layout on sys.path, so tests import ``usr.plugins.a0_reranker``."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from support.a0_layout import build_a0_root, install_on_sys_path

A0_ROOT = build_a0_root()
atexit.register(shutil.rmtree, A0_ROOT, True)  # a temporary folder: not left behind by each run
install_on_sys_path(A0_ROOT)

import pytest  # noqa: E402

# A shell starts a job in the background with SIGINT ignored, and every process it starts inherits that:
# the Ctrl-C tests (in this process and in the commands they start) need it handled as Python does by default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A developer's own proxy (curl's variables, which the plugin honours) must not carry the suite's requests to
# made-up host names elsewhere: the proxy tests set their own, per test.
for _name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy",
              "NO_PROXY"):
    os.environ.pop(_name, None)

# Per-test limits of the slow tiers, sized for a loaded 2-core machine: a browser test may start
# Chromium (and fetch Alpine.js once); a real-server test may start two Infinity processes, which took
# over 120 s on a busy machine. The rest keep pyproject's 120 s.
SLOW_TIER_TIMEOUTS_S = {"browser": 300, "integration": 900}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        limits = [limit for marker, limit in SLOW_TIER_TIMEOUTS_S.items() if item.get_closest_marker(marker)]
        if limits:
            item.add_marker(pytest.mark.timeout(max(limits)))


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """A0 runs on asyncio; our async tests do too."""
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def owner_loop_shutdown() -> Iterator[None]:
    """Close the plugin's owner loop and HTTP session once, after the last test."""
    yield
    from usr.plugins.a0_reranker.service import runtime

    runtime.shutdown()


@pytest.fixture(autouse=True)
def code_not_retired() -> Iterator[None]:
    """A test of an update in place retires the plugin code imported before it (``pre_update``); the tests after
    it import that code, so it runs again, on a fresh runtime."""
    from usr.plugins.a0_reranker.process.singletons import ANCHOR_MODULE
    from usr.plugins.a0_reranker.service import runtime

    anchor = sys.modules[ANCHOR_MODULE]
    generation = anchor.generation
    yield
    if anchor.generation != generation:
        anchor.generation = generation
        runtime.shutdown()

