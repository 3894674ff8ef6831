"""README.md and the docs are written from the code: the settings table (docs/settings.md), the
README's two commands and the API example (docs/api.md) must hold, and every page they link exists."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from support.servers import serve_in_thread
from usr.plugins.a0_reranker.a0_hooks.settings_modal import load_default_settings

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
SETTINGS_PAGE = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
API_PAGE = (REPO / "docs" / "api.md").read_text(encoding="utf-8")


def settings_table() -> dict[str, str]:
    rows = re.findall(r"^\| `(rerank_[a-z_]+)` \| (.+?) \|", SETTINGS_PAGE, flags=re.MULTILINE)
    return dict(rows)


def test_every_setting_is_documented_with_its_default() -> None:
    table = settings_table()
    defaults = load_default_settings()
    assert list(table) == list(defaults)
    for key, value in defaults.items():
        shown = table[key].strip("`")
        expected = "true" if value is True else "false" if value is False else ('""' if value == "" else str(value))
        assert shown == expected, key


def test_the_quickstart_has_exactly_two_commands_that_exist() -> None:
    block = re.search(r"## Quickstart\n\n```sh\n(.*?)```", README, flags=re.DOTALL)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert commands == [
        "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/a0-reranker demo",
        "./scripts/test.sh",
    ]
    assert os.access(REPO / "scripts" / "test.sh", os.X_OK)
    assert "./scripts/test.sh" in (REPO / ".ci" / "run").read_text()


def test_the_programmatic_api_example_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    example = re.search(r"# Programmatic API.*?```python\n(.*?)```", API_PAGE, flags=re.DOTALL)
    assert example is not None
    assert not (REPO / "config.json").exists(), "a saved config.json in the working tree would change this test"
    with serve_in_thread("tei") as server:
        # The example reads the plugin's own settings; A0 takes a default from the environment.
        monkeypatch.setenv("A0_SET_a0_reranker__rerank_endpoint", server.url)
        namespace = {
            "query": "rotate the backup key",
            "documents": ["lunch menu", "rotate the backup key monthly", "backup schedule"],
        }
        exec(compile(example.group(1), "docs/api.md", "exec"), namespace)
    assert namespace["order"][0] == "rotate the backup key monthly"


def test_linked_docs_exist() -> None:
    for target in re.findall(r"\]\(((?:docs/|LICENSE)[^)#]*)\)", README):
        assert (REPO / target).exists(), target
    for page in (REPO / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.(?:md|png|json)|\.\./LICENSE)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), (page.name, target)


def test_readme_is_a_front_door() -> None:
    """The reference lives in docs/: README stays short enough to read through."""
    assert len(README.splitlines()) <= 250
