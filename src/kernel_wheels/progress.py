"""How long work reports itself: status lines, details, and tasks that advance.

The stages (downloads, wheel writing, builds, the index, uploads) report through a
:class:`Progress`; how that is shown is the caller's business (the CLI draws bars on a
terminal with tqdm, ``cli/progress.py``; a server or a library user shows nothing).
A :class:`Progress` is also a plain ``Callable[[str], None]``, so the stages that only
say what they do keep taking a message callback, and :func:`as_progress` turns any such
callback into a :class:`Progress` whose tasks are silent.

Tasks are advanced from worker threads (downloads, deflate workers): an implementation
must accept that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol, runtime_checkable

Unit = Literal["B", "it"]


class Task(Protocol):
    """One long step: advanced as its work is done, finished once."""

    def advance(self, amount: int = 1) -> None: ...

    def finish(self) -> None: ...


@runtime_checkable
class Progress(Protocol):
    def __call__(self, message: str) -> None:
        """A status line (what is being done, a warning); shown unless -q."""

    def detail(self, message: str) -> None:
        """A line of detail, shown only when asked for (-v)."""

    def task(self, description: str, total: int | None = None, unit: Unit = "it") -> Task:
        """A step of ``total`` units (bytes with ``unit="B"``; None: unknown)."""


class _SilentTask:
    def advance(self, amount: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass


SILENT_TASK: Task = _SilentTask()


class _Messages:
    """A message callback as a :class:`Progress`: lines go to it, details and tasks
    go nowhere."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say

    def __call__(self, message: str) -> None:
        self._say(message)

    def detail(self, message: str) -> None:
        pass

    def task(self, description: str, total: int | None = None, unit: Unit = "it") -> Task:
        return SILENT_TASK


def _nothing(_message: str) -> None:
    pass


SILENT: Progress = _Messages(_nothing)


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``1 project``, ``2 projects``, ``1 try``, ``3 tries``: a count as people write it."""
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


def readable_size(size: float) -> str:
    """``512 B``, ``1.5 kB``, ``23.4 MB``, ``1.2 GB``: a size in bytes as people read it
    (decimal units, as pip and uv show them)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size:.0f} B"


def as_progress(progress: Callable[[str], None] | None) -> Progress:
    """``progress`` itself when it is a :class:`Progress`; a plain callback (or None,
    which says nothing) wrapped so that its tasks are silent."""
    if progress is None:
        return SILENT
    if isinstance(progress, Progress):
        return progress
    return _Messages(progress)
