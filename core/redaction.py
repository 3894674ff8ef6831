"""Keep secrets out of every text we log, store or return.

Servers put our own input into their error text: some echo the Authorization header, many quote the
documents they refused. Error text is shortened to a few hundred characters with a trailing ellipsis,
which can cut an echoed secret in two, so a secret's first part at such a cut is masked as well.
"""

from __future__ import annotations

from typing import Final

MASK: Final = "***"
ELLIPSIS: Final = "…"  # what ``error_bodies`` ends a shortened message with
MIN_SECRET_CHARS: Final = 4  # shorter texts are too common to mask without mangling the message


def redact(text: str, *secrets: str) -> str:
    """Replace every occurrence of each (non-trivial) secret, and a cut-off start of one, with a mask."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS:
            text = _mask_cut_start(text.replace(secret, MASK), secret)
    return text


def _mask_cut_start(text: str, secret: str) -> str:
    """A message shortened with an ellipsis may end in the first part of a secret: mask that part."""
    if not text.endswith(ELLIPSIS):
        return text
    head = text[: -len(ELLIPSIS)]
    for size in range(min(len(secret) - 1, len(head)), MIN_SECRET_CHARS - 1, -1):
        if head.endswith(secret[:size]):
            return head[:-size] + MASK + ELLIPSIS
    return text
