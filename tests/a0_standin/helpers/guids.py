"""A0 `helpers/guids.generate_id`: short random ids (memory ids are 10 characters)."""

from __future__ import annotations

import secrets
import string

_ALPHABET = string.ascii_letters + string.digits


def generate_id(length: int = 8) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))
