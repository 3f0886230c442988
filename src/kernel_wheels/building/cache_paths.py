"""The build's work folder: one per running build, under kernel-wheels' cache
(``$KERNEL_WHEELS_CACHE/build-work/<pid>-<random>``), removed when the build ends,
fails or is interrupted. A build killed outright (SIGKILL) cannot clean up; the next
build removes every work folder whose process is gone."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..cache import cache_dir
from ..processes import alive


def remove_stale_work_folders(base: Path) -> None:
    for folder in base.iterdir() if base.is_dir() else ():
        pid_text = folder.name.split("-", 1)[0]
        if pid_text.isdigit() and not alive(int(pid_text)):
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def work_root() -> Iterator[Path]:
    base = cache_dir("build-work")
    base.mkdir(parents=True, exist_ok=True)
    remove_stale_work_folders(base)
    folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
