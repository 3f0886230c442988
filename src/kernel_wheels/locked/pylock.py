"""``to-wheel --lock ... --pylock URL``: one PEP 751 lock file per build target.

A ``kernels.lock`` pins each kernel to a commit; its wheels, once published, can be
pinned the same way for installers: ``pylock.<target>.toml`` lists, for the machines of
one build target (``torch213-cxx11-cpu``, ``torch214-cxx11-cu130``...), the one build of
each locked kernel that target's index would list (the same rule as the static site's
target indexes, :func:`~kernel_wheels.index.targets.select_for_target`), at its URL on the
private index, with its sha256 and size. ``uv pip install -r pylock.<target>.toml`` (and
any PEP 751 installer) then installs exactly those files, checked against those hashes.

Only the kernels are listed: torch and the kernels' own Python dependencies are the
environment's (a kernel wheel never changes torch), so the file installs into an
environment that has them.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from packaging.version import Version

from .. import __version__
from ..errors import UsageError
from ..index.targets import (
    KernelWheel,
    parse_kernel_wheel,
    parse_target_key,
    select_for_target,
    targets_of,
)

if TYPE_CHECKING:
    from .pipeline import LockedConversion


@dataclass(frozen=True)
class LockedWheel:
    """A placed wheel of a locked run: its file name, sha256 and size."""

    filename: str
    sha256: str
    size: int


def check_files_url(url: str) -> str:
    """``--pylock URL``: where the index serves the wheel files (a kernel-wheels site's
    ``.../files/``, pypiserver's ``.../packages/``), with a trailing slash."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.netloc):
        raise UsageError(f"--pylock {url}: give the http(s) URL the index serves the wheel files "
                         "under (a kernel-wheels site's https://HOST/files/, pypiserver's "
                         "https://HOST/packages/)")
    if parts.username or parts.password:
        raise UsageError("--pylock: give the URL without credentials (a lock file is shared; "
                         "installers read credentials from .netrc or the keyring)")
    return url if url.endswith("/") else url + "/"


def _toml_string(text: str) -> str:
    # A JSON string is a valid TOML basic string for what we write (escapes included).
    return json.dumps(text)


def render_pylock(wheels: Sequence[tuple[KernelWheel, LockedWheel]], files_url: str) -> str:
    """The PEP 751 text for one target: a package per kernel, its wheels (one per
    platform) with URL, size and sha256."""
    newest: dict[str, Version] = {}  # one version per kernel: the one an installer takes
    for kernel, _ in wheels:
        if kernel.project not in newest or kernel.version > newest[kernel.project]:
            newest[kernel.project] = kernel.version
    lines = ['lock-version = "1.0"', f"created-by = {_toml_string('kernel-wheels ' + __version__)}"]
    for project in sorted(newest):
        lines += ["", "[[packages]]", f"name = {_toml_string(project)}",
                  f"version = {_toml_string(str(newest[project]))}"]
        for kernel, placed in sorted(wheels, key=lambda pair: pair[1].filename):
            if kernel.project != project or kernel.version != newest[project]:
                continue
            lines += ["", "[[packages.wheels]]", f"name = {_toml_string(placed.filename)}",
                      f"url = {_toml_string(files_url + quote(placed.filename))}",
                      f"size = {placed.size}",
                      f"hashes = {{sha256 = {_toml_string(placed.sha256)}}}"]
    return "\n".join(lines) + "\n"


def write_pylocks(placed: Sequence[LockedWheel], folder: Path, files_url: str) -> list[Path]:
    """``pylock.<target>.toml`` in ``folder`` for every build target among the wheels
    (each written whole, then renamed into place). Returns the paths written."""
    kernels = [(wheel, entry) for entry in placed
               if (wheel := parse_kernel_wheel(entry.filename)) is not None]
    written = []
    for key in sorted(targets_of(wheel for wheel, _ in kernels)):
        listed = {w.filename for w in select_for_target(parse_target_key(key),
                                                        (wheel for wheel, _ in kernels))}
        text = render_pylock([pair for pair in kernels if pair[0].filename in listed], files_url)
        path = folder / f"pylock.{key}.toml"
        handle, temp = tempfile.mkstemp(prefix=".pylock.", dir=folder)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
        written.append(path)
    return written


def write_conversion_pylocks(conversion: LockedConversion, output_dir: Path, files_url: str) -> list[Path]:
    """:func:`write_pylocks` for the wheels a locked conversion placed, beside them
    (``output_dir`` when it placed none). Returns the paths written."""
    wheels = conversion.wheels
    return write_pylocks([LockedWheel(w.path.name, w.sha256, w.size) for w in wheels],
                         wheels[0].path.parent if wheels else output_dir, files_url)
