"""Session set-up: the A0 layout on sys.path, so tests import ``usr.plugins.a0_reranker``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from support.a0_layout import build_a0_root, install_on_sys_path

A0_ROOT = build_a0_root()
install_on_sys_path(A0_ROOT)

import pytest  # noqa: E402


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
