"""The processes of this host: whether one still runs (the one test behind every "left by
a killed run" judgement: a build's work folders, a mirror's temporary files, a lease), and
workers that do not outlive the run that started them."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists; one of another user counts (signal 0 is refused,
    but only a live process can refuse it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_parent(parent: int) -> None:
    """A worker process's initializer: the worker ends when its run (``parent``) is
    killed. A worker left behind would hold what the run held (the site's lock, forked
    with its descriptor, would keep every later run waiting) or finish half a job that
    the next run completes anyway (the mirror's finish)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    # A run killed between the fork and the line above sends no signal: its worker
    # finds itself adopted by another process, and goes.
    if os.getppid() != parent:
        os._exit(1)
