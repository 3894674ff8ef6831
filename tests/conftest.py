"""Session set-up: the A0 layout on sys.path, so tests import ``usr.plugins.a0_reranker``."""

from __future__ import annotations

import sys
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
