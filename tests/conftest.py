"""Session set-up: the A0 layout on sys.path, so tests import ``usr.plugins.a0_reranker``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from support.a0_layout import build_a0_root, install_on_sys_path  # noqa: E402

A0_ROOT = build_a0_root()
install_on_sys_path(A0_ROOT)
