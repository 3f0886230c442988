"""A variant folder's files and where each goes in the wheel.

Two layouts exist: legacy (``<variant>/<module>/__init__.py``) and flat
(``<variant>/__init__.py`` plus a compatibility sub-package ``<variant>/<module>/``).
Either way the wheel holds the package under ``<module>/``; the flat layout's
compatibility sub-package is not needed there and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import LfsPointerError, VariantError

LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
_MAX_POINTER_SIZE = 1024


@dataclass(frozen=True)
class PackedFile:
    source: Path
    relpath: str  # relative to the variant folder, '/'-separated
    arcname: str  # path inside the wheel


@dataclass(frozen=True)
class VariantLayout:
    kind: str  # "flat" or "legacy"
    module: str
    files: tuple[PackedFile, ...]


def wheel_arcname(relpath: str, kind: str, module: str) -> str | None:
    """Where a variant file goes in the wheel; None when it is not packed."""
    if "__pycache__" in relpath.split("/") or relpath.endswith(".pyc"):
        return None
    if kind == "flat":
        if relpath.startswith(module + "/"):
            return None  # the compatibility sub-package
        return f"{module}/{relpath}"
    if relpath.startswith(module + "/"):
        return relpath
    return f"{module}/{relpath}"  # e.g. metadata.json beside the package


def is_lfs_pointer(path: Path) -> bool:
    if path.stat().st_size > _MAX_POINTER_SIZE:
        return False
    with path.open("rb") as stream:
        return stream.read(len(LFS_POINTER_PREFIX)) == LFS_POINTER_PREFIX


def read_layout(variant_dir: Path, module: str, link_root: Path) -> VariantLayout:
    """Classify a variant folder and list the files to pack, refusing LFS pointers and
    symbolic links that lead outside ``link_root``."""
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
    files = []
    for path in sorted(variant_dir.rglob("*")):
        if path.is_symlink() and not path.resolve().is_relative_to(link_root.resolve()):
            raise VariantError(f"{variant_dir.name}/{path.relative_to(variant_dir)} is a symbolic "
                               "link that leads outside the source; refusing to pack it")
        if not path.is_file():
            continue
        relpath = path.relative_to(variant_dir).as_posix()
        arcname = wheel_arcname(relpath, kind, module)
        if arcname is None:
            continue
        if is_lfs_pointer(path):
            raise LfsPointerError(
                f"{variant_dir.name}/{relpath} is a git-LFS pointer, not the file itself "
                "(fetch LFS objects: git lfs pull, or use the Hub source)")
        files.append(PackedFile(path, relpath, arcname))
    return VariantLayout(kind, module, tuple(files))
