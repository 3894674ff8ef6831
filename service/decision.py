"""Who decides a handed-over rerank's outcome: the owner loop with its result, or the caller's backstop
with its timeout, whichever comes first, under one lock. The outcome the caller returns is then the one
counted. (Before, a result the owner loop had counted as reranked, delivered in the instant a busy
machine's backstop fired, reached nobody, and the caller's timeout went uncounted.)"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class Decision(Generic[T]):
    """Shared by one caller (any thread) and the owner loop; decided once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._given_up = False
        self._decided = False
        self._value: T | None = None

    def decide(self, value: T) -> bool:
        """The owner loop's outcome, to count as it is; False when the caller gave up first (count the
        timeout it returned instead)."""
        with self._lock:
            if self._given_up:
                return False
            self._decided, self._value = True, value
            return True

    def give_up(self) -> tuple[bool, T | None]:
        """The caller's backstop: ``(True, value)`` when the owner loop decided first (return that),
        else ``(False, None)`` and the call is given up (the owner loop counts it as a timeout)."""
        with self._lock:
            if self._decided:
                return True, self._value
            self._given_up = True
            return False, None

    @property
    def given_up(self) -> bool:
        with self._lock:
            return self._given_up
