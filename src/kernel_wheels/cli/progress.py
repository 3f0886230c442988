"""The terminal's view of :mod:`kernel_wheels.progress`: lines and tqdm bars on stderr.

As pip does: bars only when stderr is a terminal (``--progress-bar on`` forces them,
``off`` never draws them), ``-q`` keeps warnings and errors only, ``-qq`` errors only,
``-v`` adds the details. stdout is never touched: it carries the command's result
(``--json``).
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import IO, TYPE_CHECKING

from ..progress import SILENT_TASK, Task, Unit

if TYPE_CHECKING:
    from tqdm import tqdm

MODES = ("auto", "on", "off")


class _Bar:
    """A tqdm bar advanced from any thread."""

    def __init__(self, bar: tqdm, lock: threading.Lock) -> None:
        self._bar, self._lock, self._done = bar, lock, False

    def advance(self, amount: int = 1) -> None:
        with self._lock:
            if not self._done:
                self._bar.update(amount)

    def finish(self) -> None:
        with self._lock:
            if not self._done:
                self._done = True
                self._bar.close()


class TerminalProgress:
    """A :class:`kernel_wheels.progress.Progress` for one command run."""

    def __init__(self, verbosity: int = 0, bars: bool = False, stream: IO[str] | None = None) -> None:
        self.verbosity, self.bars = verbosity, bars
        self._stream = stream or sys.stderr
        self._lock = threading.Lock()

    def _write(self, message: str) -> None:
        if self.bars:
            from tqdm import tqdm

            tqdm.write(message, file=self._stream)  # above the bars, not through them
        else:
            print(message, file=self._stream, flush=True)

    def __call__(self, message: str) -> None:
        if self.verbosity >= 0 or (self.verbosity == -1 and message.startswith("warning:")):
            self._write(message)

    def detail(self, message: str) -> None:
        if self.verbosity >= 1:
            self._write(message)

    def task(self, description: str, total: int | None = None, unit: Unit = "it") -> Task:
        if not self.bars or self.verbosity < 0:
            return SILENT_TASK
        from tqdm import tqdm

        # Left on the screen when done, as pip's are: the size and the rate it ran at.
        bar = tqdm(total=total, desc=description, unit=unit, unit_scale=unit == "B",
                   unit_divisor=1024 if unit == "B" else 1000, file=self._stream, leave=True,
                   dynamic_ncols=True, mininterval=0.2)
        return _Bar(bar, self._lock)


def wants_bars(mode: str, stream: IO[str]) -> bool:
    if mode == "on":
        return True
    if mode == "off":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def from_args(args: argparse.Namespace) -> TerminalProgress:
    verbosity = getattr(args, "verbose", 0) - getattr(args, "quiet", 0)
    mode = getattr(args, "progress_bar", "auto")
    return TerminalProgress(verbosity, wants_bars(mode, sys.stderr))
