"""The repository stands alone: no tracked file cites a document its users do not have.

Five notes that were kept beside the repository while it was built (the wire facts of the reranker
servers, Agent Zero's plugin facts, the design, the style guide and the first plugin's description)
are not part of it. Code, tests and docs cite the public sources instead (the servers' own
documentation, Agent Zero's files by their path in its repository) or state the fact where it is
used. Their names are built from pieces here, so that this file does not mention them either.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_STEMS = ("PROTO" + "COLS", "DE" + "SIGN", "ST" + "YLE", "SE" + "ED", "A0_" + "FACTS")
ABSENT_NOTES = tuple(f"{stem}.md" for stem in _STEMS)
# the file names, and the bare names the notes were cited by ("<name> section 5", "<name> <sign>3.1")
CITATION = re.compile("|".join([*(re.escape(name) for name in ABSENT_NOTES),
                                rf"\b{_STEMS[0]}\b", rf"\b{_STEMS[4]}\b"]))
# a section sign cites a section of a named public document ("RFC 9110 <sign>10.2.3"), never one of
# theirs; written as an escape so that this file has none
SIGN = "\u00a7"
SECTION_SIGN = re.compile(SIGN)
NAMED_DOCUMENT_BEFORE = re.compile(r"\bRFC \d+ $")


def tracked_text_files() -> list[Path]:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are not known")
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, text=True,
                            timeout=30, check=True).stdout.split("\0")
    texts = []
    for rel in filter(None, listed):
        path = REPO / rel
        if path.is_file() and b"\0" not in path.read_bytes()[:8192]:
            texts.append(path)
    return texts


def test_no_tracked_file_cites_the_notes_that_are_not_in_the_repository() -> None:
    found = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert found == [], "\n".join(found)


def test_every_section_sign_follows_the_public_document_it_cites() -> None:
    found = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in SECTION_SIGN.finditer(text):
            if not NAMED_DOCUMENT_BEFORE.search(text[max(0, match.start() - 12):match.start()]):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}")
    assert found == [], "section signs that cite no public document: " + ", ".join(found)


def test_the_check_finds_a_citation_and_a_bare_section_sign() -> None:
    """Both checks can fail: they see the forms the old citations took."""
    assert CITATION.search(f"as {ABSENT_NOTES[0]} records it") and CITATION.search(f"({_STEMS[4]} {SIGN}4.4)")
    assert not CITATION.search("SEED = 20240611") and not CITATION.search("the design of the batcher")
    assert SECTION_SIGN.search(f"recall ({SIGN}4.4)") and not NAMED_DOCUMENT_BEFORE.search("recall (")
    assert NAMED_DOCUMENT_BEFORE.search("(RFC 9110 ")
