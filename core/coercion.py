"""What arrives from forms, YAML, JSON and env overrides (``A0_SET_*`` overrides and hand-edited files send
text), turned into each setting's type. A ``ValueError`` repeats no more than a short, safe form of the value.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from .endpoint_url import LIST_SEPARATOR
from .redaction import shown_value

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"expected true or false, got {shown_value(value)}")


def to_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    with contextlib.suppress(ValueError):
        if isinstance(value, float | str) and (number := to_float(value)).is_integer():
            return int(number)
    raise ValueError(f"expected a whole number, got {shown_value(value)}")


def to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {shown_value(value)}")
    try:
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str):
            number = float(value.strip())
        else:
            raise ValueError
    except (ValueError, OverflowError):  # OverflowError: an int such as 10**400
        raise ValueError(f"expected a number, got {shown_value(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {shown_value(value)}")
    return number


def to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"expected text, got {type(value).__name__}")


def to_choice(value: Any, choices: tuple[str, ...]) -> str:
    text = to_str(value).strip().lower()
    if text not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}, got {shown_value(value)}")
    return text


def to_endpoints(value: Any) -> str:
    """One URL, several in one text, or a YAML/JSON list of them."""
    if isinstance(value, list | tuple):
        return LIST_SEPARATOR.join(to_str(item).strip() for item in value)
    return to_str(value)


def to_switch(value: Any, choices: tuple[str, ...]) -> str:
    """A three-way setting (``auto``/``on``/``off``) that also takes true and false."""
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    try:
        return "on" if to_bool(value) else "off"
    except ValueError:
        raise ValueError(f"expected one of {', '.join(choices)}, got {shown_value(value)}") from None
