"""Comma-separated lists for the benchmark's options (``--concurrency 1,4,16``, ``--loads 1.2,2,5``)."""

from __future__ import annotations

import argparse

from ..cli.options import positive_int


def positive_float_list(text: str) -> tuple[float, ...]:
    """argparse type: ``1.2,2,5`` -> (1.2, 2.0, 5.0), each a finite number above 0, no duplicates."""
    values = []
    for part in (part.strip() for part in text.split(",")):
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected numbers such as 1.2,2,5, got {part!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected numbers above 0, got {part!r}")
        values.append(value)
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"repeated value in {text!r}")
    return tuple(values)


def int_list(text: str) -> tuple[int, ...]:
    """argparse type: ``1,4,16,64`` -> (1, 4, 16, 64), each >= 1, no duplicates."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("expected a comma-separated list such as 1,4,16,64")
    values = tuple(positive_int(part) for part in parts)
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"repeated value in {text!r}")
    return values
