"""Keep secrets out of every text we log, store or return."""

from __future__ import annotations

MASK = "***"


def redact(text: str, *secrets: str) -> str:
    """Replace every occurrence of each (non-trivial) secret with a mask."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    return text
