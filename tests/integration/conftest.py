"""Integration-tier fixtures shared by its modules: the Infinity interpreter and the tiny model, built
once per session (the build is cached across sessions too, see ``infinity_model.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from integration.infinity_server import build_model, require_infinity


@pytest.fixture(scope="session")
def infinity_python() -> str:
    return require_infinity()


@pytest.fixture(scope="session")
def tiny_model(infinity_python: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    dest = tmp_path_factory.mktemp("tiny-reranker") / "model"
    report = build_model(infinity_python, dest)
    return dest, report
