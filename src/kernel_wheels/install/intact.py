"""Whether the files a distribution installed are still the files it installed, as
``pip``'s RECORD promises and ``debsums`` checks for a Debian package: every file its
RECORD lists, against that row's hash and size, and every file in the kernel's own
package folder that RECORD does not list.

Byte-code caches (``__pycache__``, ``*.pyc``) are expected: Python writes them on import
and an installer may compile them (and list them), so they are neither compared nor
counted as added. Every other difference is a line naming the file: edited, missing, not
a regular file, added, or a RECORD row whose path leads outside site-packages (a kernel
wheel installs nothing outside it). Files are read through :mod:`kernel_wheels.reading`,
in this process; which distributions there are, and where, the target Python says.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from pathlib import Path

from ..checks.contract import is_byte_code
from ..confine import Refusal, inside, regular_files, relative_path, shown
from ..errors import KernelWheelsError, UnsafeNameError
from ..reading import MAX_SMALL_FILE, open_regular, read_text

#: Hash algorithms a RECORD may use (the binary distribution format: sha256 or better).
_ALGORITHMS = frozenset({"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512",
                         "blake2b", "blake2s"})
_CHUNK = 1 << 20


class _Unreadable(KernelWheelsError):
    """An installed path that is there but is no regular file (a FIFO, a folder)."""


#: An installed file that is not what was installed: (its path in site-packages, one line).
Change = tuple[str, str]


def changed_files(site: Path, record: Path, package: str) -> list[Change]:
    """Each installed file that is not what it was when installed: the rows of ``record``
    (a dist-info's RECORD under ``site``), then the files under ``site/package`` that
    RECORD does not list. Empty: every file is as installed."""
    own = _relative(site, record)
    try:
        text = read_text(record, "a RECORD", _Unreadable, MAX_SMALL_FILE)
    except FileNotFoundError:
        return [(own, f"{own} is missing: what was installed cannot be compared")]
    except (OSError, _Unreadable) as exc:
        return [(own, _reason(own, exc))]
    changes: list[Change] = []
    listed: set[str] = set()
    for row in csv.reader(io.StringIO(text)):
        if not row or not row[0]:
            continue
        name = row[0]
        try:
            path = inside(site, relative_path(name, "RECORD"), "RECORD")
        except UnsafeNameError:
            changes.append((name, f"RECORD lists {shown(name, 200)}, a path outside site-packages"))
            continue
        listed.add(name)
        if name in (own, f"{own}.jws", f"{own}.p7s") or is_byte_code(name):
            continue  # RECORD (and its signatures) has no hash of itself; caches come and go
        if (change := _changed(path, name, row[1] if len(row) > 1 else "",
                               row[2] if len(row) > 2 else "")) is not None:
            changes.append((name, change))
    return changes + _added(site, package, listed)


def _changed(path: Path, name: str, hashed: str, size: str) -> str | None:
    algorithm, _, expected = hashed.partition("=")
    if algorithm not in _ALGORITHMS or not expected:
        return f"RECORD gives no usable hash for {shown(name, 200)} ({shown(hashed, 40) or 'none'})"
    digest = hashlib.new(algorithm)
    read = 0
    try:
        with open_regular(path, "the installed file", _Unreadable, limit=None) as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
                read += len(chunk)
    except FileNotFoundError:
        return f"{shown(name, 200)} is missing: it was installed and has been removed since"
    except (OSError, _Unreadable) as exc:
        return _reason(shown(name, 200), exc)
    found = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    if found != expected.rstrip("=") or (size.isdigit() and int(size) != read):
        return (f"{shown(name, 200)} was edited since it was installed (its {algorithm} is not "
                "the one RECORD lists)")
    return None


def _added(site: Path, package: str, listed: set[str]) -> list[Change]:
    """The files under ``site/package`` that RECORD does not list."""
    def refuse(refusal: Refusal) -> Exception:
        return _Unreadable(refusal.message(f"{package}/{refusal.relpath}", "site-packages",
                                           "trust it"))

    folder = site / package
    if not folder.is_dir():
        return []
    try:
        files = regular_files(folder, site, refuse)
    except _Unreadable as exc:
        return [(package, exc.message)]
    except OSError as exc:
        return [(package, f"{package}/ cannot be read ({exc.strerror or exc})")]
    return [(name, f"{shown(name, 200)} was not installed by it: it was added since (RECORD does "
                   "not list it)") for _path, relpath in files
            if not is_byte_code(name := f"{package}/{relpath}") and name not in listed]


def _relative(site: Path, path: Path) -> str:
    return path.relative_to(site).as_posix() if path.is_relative_to(site) else str(path)


def _reason(name: str, exc: Exception) -> str:
    if isinstance(exc, _Unreadable):
        return exc.message
    return f"{name} cannot be read ({getattr(exc, 'strerror', None) or exc})"
