"""Whether a process of this host still runs: the one test behind every "left by a
killed run" judgement (a build's work folders, a mirror's temporary files, a lease)."""

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
