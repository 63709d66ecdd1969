"""A progress bar on stderr, from the standard library only.

The engine reports ``(phase, done, total)`` from its worker threads (see ``src/progress.rs``); this draws
one line per phase, redrawn at most ten times a second, and only when stderr is a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

_LABELS = {"count": ("pre-tokenizing", "MB"), "merge": ("merging", "merges"), "encode": ("encoding", "MB")}


class ProgressBar:
    """A callable ``(phase, done, total)`` that draws a bar; use as a context manager to end the line.

    >>> import io
    >>> class Terminal(io.StringIO):
    ...     def isatty(self):
    ...         return True
    >>> screen = Terminal()
    >>> with ProgressBar(screen) as bar:
    ...     bar("count", 500_000, 2_000_000)
    ...     bar("merge", 10, 10)
    >>> print(screen.getvalue().replace("\\r", ""), end="")
     pre-tokenizing [#######                       ] 0.5/2.0 MB    0.0s
            merging [##############################] 10/10 merges    0.0s
    """

    def __init__(self, stream: TextIO | None = None, min_interval: float = 0.1) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.min_interval = min_interval
        self.phase: str | None = None
        self.last_draw = 0.0
        self.start = time.monotonic()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if phase != self.phase:
            if self.phase is not None:
                self.stream.write("\n")
            self.phase, self.start = phase, now
        elif now - self.last_draw < self.min_interval and done < total:
            return
        self.last_draw = now
        label, unit = _LABELS.get(phase, (phase, ""))
        scale = 1e6 if unit == "MB" else 1
        frac = done / total if total else 1.0
        bar = "#" * int(30 * frac)
        digits = 1 if unit == "MB" and total < 100 * scale else 0  # 0.3/1.2 MB, not 0/1 MB
        self.stream.write(
            f"\r{label:>15} [{bar:<30}] {done / scale:,.{digits}f}/{total / scale:,.{digits}f} {unit}"
            f" {now - self.start:6.1f}s"
        )
        self.stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self.phase is not None:
            self.stream.write("\n")
            self.stream.flush()
