"""Integration-tier fixtures shared by its modules: the Infinity interpreter and the tiny model.

The model is built (trained, on a cold cache) once, after collection and before the first test, so
the build counts against no test's time limit; the session fixture then copies it from the cache
(``infinity_model.py``) in milliseconds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from integration import infinity_server
from integration.infinity_server import build_model, require_infinity

_BUILD_FAILURE: list[BaseException] = []  # what the build before the first test raised, for the fixture to report


def pytest_collection_finish(session: pytest.Session) -> None:
    """Warm the model cache when integration tests will run: set-up, outside any test's limit."""
    python = infinity_server.infinity_python()
    if python is None or not any(item.get_closest_marker("integration") for item in session.items):
        return
    with tempfile.TemporaryDirectory(prefix="a0r-tiny-reranker-") as scratch:
        try:
            build_model(python, Path(scratch) / "model")
        except Exception as exc:  # reported by the fixture, as the failure of the tests that need the model
            _BUILD_FAILURE.append(exc)


@pytest.fixture(scope="session")
def infinity_python() -> str:
    return require_infinity()


@pytest.fixture(scope="session")
def tiny_model(infinity_python: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    if _BUILD_FAILURE:
        raise _BUILD_FAILURE[0]
    dest = tmp_path_factory.mktemp("tiny-reranker") / "model"
    report = build_model(infinity_python, dest)
    return dest, report
