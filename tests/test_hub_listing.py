"""The Plugin Hub listing in docs/hub/ passes the index's own validator, and the path the Hub downloads
the thumbnail into, inside the installed plugin folder, is neither tracked nor unignored, so a
``git pull`` update never stops on it.

docs/hub/ holds exactly what is submitted as ``plugins/a0_reranker/`` to agent0ai/a0-plugins, whose
``scripts/validate_plugin_submission.py`` fails a submission on any of these (each test below applies
one of its rules; the ones that need the network, the GitHub API and the screenshot downloads, are
checked here against this repository's files instead):
- a file in the folder other than ``index.yaml`` and one ``thumbnail.{png,jpg,jpeg,webp}``, or any
  folder in it ("Unexpected file in plugin folder: ...");
- ``index.yaml`` over 2,000 characters, not a mapping, with a field other than ``title``,
  ``description``, ``github``, ``tags``, ``screenshots``, or without a non-empty string ``title``,
  ``description`` or ``github``; a stripped title over 50 characters or description over 500;
- ``github`` not of the form ``https://github.com/<owner>/<repo>``, or a repository whose root
  ``plugin.yaml`` has a ``name`` other than the folder name;
- ``tags`` not a list of non-empty strings, or more than 5 (the index's ``TAGS.md`` recommends its
  list of short lowercase tags);
- ``screenshots`` not a list of at most 5 full http(s) URLs ending in png/jpg/jpeg/webp, each at
  most 2 MB;
- a thumbnail over 20 KB (20,480 bytes) or not square.
The download path is A0's (``plugins/_plugin_installer/helpers/install.py`` ``_download_thumbnail``):
``webui/thumbnail.<ext>`` with ``ext`` one of png, jpg, jpeg, gif, webp.
"""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
HUB = REPO / "docs" / "hub"
SUBMITTED_NAME = "index.yaml"
INDEX_IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp")
GITHUB_REPO_URL = re.compile(r"^https?://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$")  # the validator's own pattern
GITHUB = "https://github.com/King0James0/a0-reranker"
RAW_PREFIX = "https://raw.githubusercontent.com/King0James0/a0-reranker/main/"
THUMBNAIL_DOWNLOAD_EXTENSIONS = ("png", "jpg", "jpeg", "gif", "webp")
NAME = re.compile(r"^[a-z0-9_]+$")
TAG = re.compile(r"^[a-z0-9-]+$")


def index() -> dict[str, Any]:
    data = yaml.safe_load((HUB / "index.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def git(*args: str) -> subprocess.CompletedProcess[str]:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: tracking cannot be checked")
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30, check=False)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_folder_holds_only_the_index_file_and_one_thumbnail() -> None:
    """What is submitted and nothing else: a how-to kept here fails the index's check of the folder."""
    unexpected = [p.name for p in HUB.iterdir()
                  if p.is_dir() or not (p.name == SUBMITTED_NAME or
                                        (p.stem == "thumbnail" and p.suffix.lower() in INDEX_IMAGE_EXTENSIONS))]
    assert unexpected == [], f"Unexpected file in plugin folder: {unexpected}"
    assert len([p for p in HUB.iterdir() if p.stem == "thumbnail"]) == 1
    tracked = git("ls-files", "--", "docs/hub").stdout.split()
    assert sorted(tracked) == ["docs/hub/index.yaml", "docs/hub/thumbnail.png"]


def test_the_submission_how_to_lives_outside_the_submitted_folder() -> None:
    how_to = REPO / "docs" / "hub-submission.md"
    text = how_to.read_text(encoding="utf-8")
    assert "docs/hub/" in text and "plugins/a0_reranker/" in text and "tests/test_hub_listing.py" in text


def test_index_yaml_has_only_the_allowed_fields_within_their_limits() -> None:
    raw = (HUB / "index.yaml").read_text(encoding="utf-8")
    data = index()
    assert len(raw) <= 2000
    assert set(data) <= {"title", "description", "github", "tags", "screenshots"}
    assert all(isinstance(data.get(key), str) and data[key].strip() for key in ("title", "description", "github"))
    assert len(data["title"].strip()) <= 50 and len(data["description"].strip()) <= 500
    tags = data.get("tags", [])
    assert isinstance(tags, list) and len(tags) <= 5 and all(isinstance(t, str) and TAG.match(t) for t in tags)
    assert all(t.strip() for t in tags)


def test_github_is_a_repository_url_the_validator_accepts() -> None:
    assert GITHUB_REPO_URL.match(index()["github"].strip())


def test_the_listing_points_at_this_repository_whose_plugin_name_is_the_index_folder() -> None:
    assert index()["github"] == GITHUB
    assert GITHUB in (REPO / "README.md").read_text(encoding="utf-8")  # the Git-URL install says the same
    name = yaml.safe_load((REPO / "plugin.yaml").read_text(encoding="utf-8"))["name"]
    assert name == "a0_reranker" and NAME.match(name) and not name.startswith("_")


def test_screenshots_are_full_urls_of_small_images_in_this_repository() -> None:
    screenshots = index().get("screenshots", [])
    assert isinstance(screenshots, list) and 1 <= len(screenshots) <= 5
    tracked = set(git("ls-files").stdout.splitlines())
    for url in screenshots:
        assert isinstance(url, str) and url.startswith(RAW_PREFIX), url
        assert Path(urlparse(url).path).suffix.lower() in INDEX_IMAGE_EXTENSIONS, url
        path = url.removeprefix(RAW_PREFIX)
        assert path in tracked, f"{path} must be committed for the URL to exist on main"
        assert (REPO / path).stat().st_size <= 2 * 1024 * 1024, path


def test_the_thumbnail_is_a_square_png_of_at_most_20_kb() -> None:
    thumbnail = HUB / "thumbnail.png"
    width, height = png_size(thumbnail)
    assert width == height >= 64
    assert thumbnail.stat().st_size <= 20 * 1024
    assert [p.name for p in HUB.iterdir() if p.stem == "thumbnail"] == ["thumbnail.png"]  # one thumbnail


@pytest.mark.parametrize("ext", THUMBNAIL_DOWNLOAD_EXTENSIONS)
def test_the_hubs_thumbnail_download_path_is_not_tracked_and_is_ignored(ext: str) -> None:
    path = f"webui/thumbnail.{ext}"
    assert git("ls-files", "--error-unmatch", path).returncode != 0, f"{path} is tracked: a Hub update would abort"
    assert git("check-ignore", "--no-index", "-q", path).returncode == 0, f"{path} is not in .gitignore"
