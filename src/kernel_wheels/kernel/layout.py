"""A variant folder's files and where each goes in the wheel.

Two layouts of a variant folder exist: legacy (``<variant>/<module>/__init__.py``) and
flat (``<variant>/__init__.py`` plus a compatibility sub-package ``<variant>/<module>/``).
Either way the wheel carries the folder whole and unchanged at ``<module>/<variant>/``
(:func:`variant_arcname`): every file its ``metadata.json`` digests is byte for byte the
Hub's, so the ``kernels`` library can verify and load the installed folder; the package
``<module>`` itself is a small loader kernel-wheels writes beside it (``wheel/loader.py``).
Byte-code caches (``__pycache__``, ``.pyc``) are left out, and reported.

Every file of the folder is either packed or left out by that rule (and reported), or
the conversion stops naming it: nothing is dropped silently. Refused:
FIFOs, sockets and device files, symbolic links leading outside the source (the variant
folder and ``build/`` included) and link loops, git-LFS pointers, names a wheel cannot
carry (backslashes, control characters, bytes that are not UTF-8).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..confine import Problem, Refusal, regular_files
from ..errors import LfsPointerError, VariantError
from .arrival import Arrival

#: What a binary of a variant folder is called (an ELF ``.so``, a Mach-O ``.dylib``, a
#: PE ``.dll``/``.pyd``; ``libfoo.so.1``).
BINARY_SUFFIXES = (".so", ".dylib", ".dll", ".pyd")
LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
_MAX_POINTER_SIZE = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class PackedFile:
    source: Path
    relpath: str  # relative to the variant folder, '/'-separated
    arcname: str  # path inside the wheel
    arriving: Arrival | None = None  # still being downloaded to ``source``


@dataclass(frozen=True)
class VariantLayout:
    kind: str  # "flat" or "legacy"
    module: str
    files: tuple[PackedFile, ...]
    #: Files left out by design (byte-code caches), relative to the variant folder.
    left_out: tuple[str, ...] = ()
    #: The variant folder's name, as it is carried in the wheel (``<module>/<folder>/``).
    folder: str = ""


def is_binary_name(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(BINARY_SUFFIXES) or ".so." in base


def variant_arcname(relpath: str, module: str, variant: str) -> str | None:
    """Where a variant file goes in the wheel (``<module>/<variant>/<relpath>``); None for
    byte-code caches, which are not packed."""
    if "__pycache__" in relpath.split("/") or relpath.endswith(".pyc"):
        return None
    return f"{module}/{variant}/{relpath}"


def is_lfs_pointer(path: Path) -> bool:
    if path.stat().st_size > _MAX_POINTER_SIZE:
        return False
    with path.open("rb") as stream:
        return stream.read(len(LFS_POINTER_PREFIX)) == LFS_POINTER_PREFIX


def _checked_name(relpath: str, variant: str) -> str:
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(relpath).decode("utf-8", "backslashreplace")
        raise VariantError(f"{variant}/{_escaped(shown)} has a name that is not UTF-8; "
                           "rename it") from None
    if _CONTROL.search(relpath):
        raise VariantError(f"{variant}/{_escaped(relpath)} has a control character in its name, "
                           "which a wheel cannot carry portably; rename it")
    if "\\" in relpath:
        raise VariantError(f"{variant}/{relpath} has a backslash in its name, which a wheel "
                           "cannot carry portably; rename it")
    return relpath


def _escaped(name: str) -> str:
    """``name`` with control characters (a newline...) written as ``\\xNN``: one line."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", name)


def _walk(variant_dir: Path, link_root: Path) -> list[tuple[Path, str]]:
    """Every regular file under ``variant_dir`` (``(path, relpath)``), following symbolic
    links that stay inside ``link_root`` (each real folder once, so a link loop ends).
    The variant folder itself, and ``build/``, may be links only within the source."""
    folder = variant_dir.name

    def refused(refusal: Refusal) -> VariantError:
        if refusal.problem is Problem.OUTSIDE and not refusal.relpath:
            return VariantError(f"{folder} (or the build/ folder holding it) is a symbolic link "
                                "that leads outside the source; refusing to pack it")
        where = f"{folder}/{refusal.relpath}" if refusal.relpath else folder
        return VariantError(refusal.message(where, "the source", "pack it"))

    try:
        return regular_files(variant_dir, link_root, refused,
                             check_name=lambda relpath: _checked_name(relpath, folder))
    except OSError as exc:  # unreadable folder, a loop the stat call met first
        where = f"{folder}/{os.path.relpath(exc.filename, variant_dir)}" \
            if isinstance(exc.filename, str) else folder
        raise VariantError(f"{_escaped(where)}: {exc.strerror or exc}; refusing to pack it") from None


def read_layout(variant_dir: Path, module: str, link_root: Path,
                arriving: Mapping[str, Arrival] | None = None,
                variant: str | None = None) -> VariantLayout:
    """Classify a variant folder and list the files to pack (see the module docstring
    for what is refused). ``arriving``: files not in the folder yet (relative path ->
    arrival), packed from where they will be; ``variant``: the folder's name on the Hub
    (``variant_dir``'s own name by default)."""
    folder = variant or variant_dir.name
    if (variant_dir / "__init__.py").is_file():
        kind = "flat"
    elif (variant_dir / module / "__init__.py").is_file():
        kind = "legacy"
    else:
        packages = sorted(p.parent.name for p in variant_dir.glob("*/__init__.py"))
        hint = f" (found package {', '.join(packages)})" if packages else ""
        raise VariantError(
            f"{variant_dir.name}: no Python package: neither __init__.py nor "
            f"{module}/__init__.py{hint}")
    arriving = arriving or {}
    found = [item for item in _walk(variant_dir, link_root) if item[1] not in arriving]
    found += [(arrival.final, _checked_name(relpath, variant_dir.name))
              for relpath, arrival in arriving.items()]
    files, left_out = [], []
    for path, relpath in sorted(found, key=lambda item: item[1]):
        arcname = variant_arcname(relpath, module, folder)
        if arcname is None:
            left_out.append(relpath)
            continue
        if relpath in arriving:  # not here yet; the Hub serves content, never an LFS pointer
            files.append(PackedFile(path, relpath, arcname, arriving[relpath]))
            continue
        if is_lfs_pointer(path):
            raise LfsPointerError(
                f"{variant_dir.name}/{relpath} is a git-LFS pointer, not the file itself "
                "(fetch LFS objects: git lfs pull, or use the Hub source)")
        files.append(PackedFile(path, relpath, arcname))
    return VariantLayout(kind, module, tuple(files), tuple(left_out), folder)
