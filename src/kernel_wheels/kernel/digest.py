"""The ``digest`` of a variant's ``metadata.json``: sha256 (base64) of every file.

Same rules as kernel-builder and the ``kernels`` loader: paths relative to the
variant folder with ``/`` separators; ``metadata.json`` itself, its signature
bundle and ``__pycache__`` contents are not covered.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

NOT_DIGESTED = frozenset({"metadata.json", "metadata.json.sigstore"})
_CHUNK = 1 << 20


def is_digested(relpath: str) -> bool:
    parts = PurePosixPath(relpath).parts
    if "__pycache__" in parts or relpath.endswith(".pyc"):
        return False
    return relpath not in NOT_DIGESTED


def sha256_b64(chunks: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return base64.b64encode(digest.digest()).decode("ascii")


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file at ``path`` (wheel file names, downloads, index entries)."""
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def file_chunks(path: Path) -> Iterable[bytes]:
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            yield chunk


def digest_folder(variant_dir: Path) -> dict[str, str]:
    """``{relpath: base64 sha256}`` over a variant folder, as metadata.json records it."""
    files = {}
    for path in sorted(variant_dir.rglob("*")):
        relpath = path.relative_to(variant_dir).as_posix()
        if path.is_file() and is_digested(relpath):
            files[relpath] = sha256_b64(file_chunks(path))
    return files
