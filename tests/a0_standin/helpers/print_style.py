"""A0 `helpers/print_style.PrintStyle`, reduced to plain printing (no colours, no HTML log)."""

from __future__ import annotations

import sys
from typing import Any


class PrintStyle:
    def __init__(self, **_style: Any) -> None:
        pass

    def print(self, *args: Any, sep: str = " ", **_kwargs: Any) -> None:
        print(*args, sep=sep, file=sys.stdout)

    def stream(self, *args: Any, sep: str = " ", **_kwargs: Any) -> None:
        print(*args, sep=sep, end="", file=sys.stdout)

    @staticmethod
    def error(*args: Any, **kwargs: Any) -> None:
        PrintStyle().print("Error:", *args, **kwargs)

    @staticmethod
    def warning(*args: Any, **kwargs: Any) -> None:
        PrintStyle().print("Warning:", *args, **kwargs)

    @staticmethod
    def standard(*args: Any, **kwargs: Any) -> None:
        PrintStyle().print(*args, **kwargs)

    @staticmethod
    def hint(*args: Any, **kwargs: Any) -> None:
        PrintStyle().print("Hint:", *args, **kwargs)

    @staticmethod
    def info(*args: Any, **kwargs: Any) -> None:
        PrintStyle().print("Info:", *args, **kwargs)

    @staticmethod
    def debug(*args: Any, **kwargs: Any) -> None:
        PrintStyle().print("Debug:", *args, **kwargs)
