"""The repository is an A0 plugin folder and also a standalone package: check both shapes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_plugin_manifest_follows_a0_rules() -> None:
    manifest = yaml.safe_load((REPO / "plugin.yaml").read_text())
    assert manifest["name"] == "a0_reranker"
    assert isinstance(manifest["version"], str)  # a float version makes A0 refuse to load the plugin
    assert manifest["settings_sections"] == ["agent"]
    assert manifest["per_project_config"] is True and manifest["per_agent_config"] is True
    assert (REPO / "LICENSE").is_file() and (REPO / "default_config.yaml").is_file()
    ignored = (REPO / ".gitignore").read_text().split()
    assert {"config.json", ".toggle-*", "execute_record.json"} <= set(ignored)


def test_the_public_import_path_is_the_one_other_plugins_use() -> None:
    from usr.plugins.a0_reranker.helpers import reranker

    assert reranker.__all__ == ["rerank", "rerank_async"]
    assert reranker.rerank.__module__ == "usr.plugins.a0_reranker.helpers.reranker"


def test_the_package_builds_as_a_standalone_wheel_and_leaves_no_build_output(tmp_path: Path) -> None:
    """The README's ``pip install .`` builds in the source folder: afterwards that folder holds exactly
    what it held before (no ``build/``, no ``*.egg-info``), so the test suite that follows reads only
    the plugin."""
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", "__pycache__", ".vendor", "node_modules", ".*_cache", "artifacts"))
    before = sorted(path.relative_to(source) for path in source.rglob("*"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
         str(source)],
        check=True, capture_output=True, timeout=600,
    )
    left = sorted(set(path.relative_to(source) for path in source.rglob("*")) - set(before))
    assert left == [], f"the build left {[str(path) for path in left]} in the source folder"
    [wheel] = tmp_path.glob("a0_reranker-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("a0_reranker/__init__.py", "a0_reranker/helpers/reranker.py", "a0_reranker/default_config.yaml",
                     "a0_reranker/plugin.yaml", "a0_reranker/service/runtime.py", "a0_reranker/core/config.py"):
        assert required in names, required
    assert not any(name.startswith("a0_reranker/tests/") for name in names)
    assert "a0_reranker/setup.py" not in names  # the build script is no module of the package
