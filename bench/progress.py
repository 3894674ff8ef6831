"""A plain-text progress bar on stderr for work done in weighted steps (no extra dependency).

On a terminal it redraws one line (a ticker thread keeps the elapsed time current); otherwise, as in
logs and CI, it prints one line per step. Once a signal stops the command it draws nothing more, and
on a terminal ends its line, so the command's one stop line stands on its own.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import TextIO

from ..cli import exits

BAR_WIDTH = 24


class ProgressBar:
    """``step(label)`` starts the next step (finishing the one before); ``close()`` finishes the last.

    As a context manager it closes on exit, and leaves the bar where it stopped when the block failed.
    """

    def __init__(self, weights: Sequence[float], stream: TextIO | None = None, tick_s: float = 0.25) -> None:
        self._weights = list(weights)
        self._total = sum(self._weights) or 1.0
        self._stream = stream or sys.stderr
        self._live = bool(getattr(self._stream, "isatty", lambda: False)())
        self._done = 0.0
        self._index = -1
        self._label = ""
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, args=(tick_s,), daemon=True) if self._live else None

    def __enter__(self) -> ProgressBar:
        if self._ticker is not None:
            self._ticker.start()
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.close(finished=kind is None)

    def step(self, label: str) -> None:
        with self._lock:
            if 0 <= self._index < len(self._weights):
                self._done += self._weights[self._index]
            self._index += 1
            self._label = label
            self._draw()

    def close(self, finished: bool = True) -> None:
        """Stop redrawing; when ``finished``, show the bar full."""
        self._stop.set()
        if self._ticker is not None and self._ticker.is_alive():
            self._ticker.join()
        with self._lock:
            if finished and self._label != "done":
                self._done, self._label = self._total, "done"
                self._draw()
            if self._live and not exits.stopping():  # else the stop line has ended the bar's line
                self._stream.write("\n")
                self._stream.flush()

    def _tick(self, tick_s: float) -> None:
        while not self._stop.wait(tick_s):
            with self._lock:
                self._draw()

    def _draw(self) -> None:
        if exits.stopping():
            return
        fraction = min(1.0, self._done / self._total)
        filled = round(fraction * BAR_WIDTH)
        step = f"{min(self._index + 1, len(self._weights))}/{len(self._weights)}"
        text = (f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction:4.0%}  {step}  {self._label}"
                f"  ({time.monotonic() - self._started:.0f} s)")
        self._stream.write(f"\r{text:<78}" if self._live else text + "\n")
        self._stream.flush()
