"""A progress bar on stderr, from the standard library only.

The engine reports ``(phase, done, total)`` from its worker threads (see ``src/progress.rs``), and
``encode_dataset`` the documents and tokens written too; this draws one line per phase, redrawn at most ten
times a second, and only when stderr is a terminal.
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

    With documents and tokens (``encode_dataset``), and tasks (:mod:`bytepair.ray`), the line ends with
    them and the time left:

    >>> screen = Terminal()
    >>> with ProgressBar(screen, min_interval=0) as bar:
    ...     bar("encode", 0, 4_000_000, 0, 0)
    ...     bar.start -= 2.0  # two seconds later, half done
    ...     bar("encode", 2_000_000, 4_000_000, 1234, 567_890)
    >>> print(screen.getvalue().split("\\r")[-1], end="")
           encoding [###############               ] 2.0/4.0 MB    2.0s  1,234 docs  567,890 tokens  ~2s left
    >>> with ProgressBar(screen, min_interval=0) as bar:
    ...     bar("count", 1_000_000, 4_000_000, 99, tasks=(1, 4))
    >>> print(screen.getvalue().split("\\r")[-1], end="")  # doctest: +ELLIPSIS
     pre-tokenizing [#######                       ] 1.0/4.0 MB    0.0s  99 docs  1/4 tasks  ~...s left
    """

    def __init__(self, stream: TextIO | None = None, min_interval: float = 0.1) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.min_interval = min_interval
        self.phase: str | None = None
        self.last_draw = 0.0
        self.start = time.monotonic()

    def __call__(
        self,
        phase: str,
        done: int,
        total: int,
        documents: int | None = None,
        tokens: int | None = None,
        tasks: tuple[int, int] | None = None,
    ) -> None:
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
        elapsed = now - self.start
        line = (
            f"\r{label:>15} [{bar:<30}] {done / scale:,.{digits}f}/{total / scale:,.{digits}f} {unit}"
            f" {elapsed:6.1f}s"
        )
        if documents is not None:
            line += f"  {documents:,} docs"
        if tokens is not None:
            line += f"  {tokens:,} tokens"
        if tasks is not None:
            line += f"  {tasks[0]:,}/{tasks[1]:,} tasks"
        if documents is not None and 0 < done < total:
            line += f"  ~{elapsed * (total - done) / done:.0f}s left"
        self.stream.write(line)
        self.stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self.phase is not None:
            self.stream.write("\n")
            self.stream.flush()
