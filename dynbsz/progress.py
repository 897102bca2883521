"""A minimal progress bar on stderr (no dependency), redrawn at most ten times a second; shared by the
dynbsz and simulator command lines."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    def __init__(self, label: str, enabled: bool | None = None, stream=None, width: int = 28):
        self.stream = stream or sys.stderr
        self.enabled = (hasattr(self.stream, "isatty") and self.stream.isatty()) if enabled is None else enabled
        self.label = label
        self.width = width
        self._last = 0.0
        self._t0 = time.perf_counter()
        self._drawn = False

    def __call__(self, done: int, total: int, what: str = "") -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        frac = done / total if total else 1.0
        bar = "#" * int(frac * self.width) + "-" * (self.width - int(frac * self.width))
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} {now - self._t0:5.1f}s {what[:40]:<40}")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
