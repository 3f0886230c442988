"""The ``digest`` of a variant's ``metadata.json``: the base64 hash of every file, with
one of kernels-data's algorithms (``sha256``, which kernel-builder writes, or ``sha512``).

Same rules as kernel-builder and the ``kernels`` loader: paths relative to the
variant folder with ``/`` separators; ``metadata.json`` itself, its signature
bundle and ``__pycache__`` contents are not covered.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from .. import data
from ..confine import Refusal, regular_files
from ..errors import VariantError

NOT_DIGESTED = frozenset({"metadata.json", "metadata.json.sigstore"})
_CHUNK = 1 << 20


def is_digested(relpath: str) -> bool:
    parts = PurePosixPath(relpath).parts
    if "__pycache__" in parts or relpath.endswith(".pyc"):
        return False
    return relpath not in NOT_DIGESTED


def algorithms() -> tuple[str, ...]:
    """The digest algorithms kernels-data reads (``digest.rs``: ``DigestAlgorithm``)."""
    return tuple(data.load("kernels_data")["digest_algorithms"])


def b64_digest(chunks: Iterable[bytes], algorithm: str = "sha256") -> str:
    """The base64 hash of ``chunks`` as metadata.json records it; ``algorithm`` is one of
    :func:`algorithms` (the reader refuses any other before it gets here)."""
    if algorithm not in algorithms():
        raise ValueError(f"digest algorithm {algorithm!r} is not one kernels-data reads")
    digest = hashlib.new(algorithm)
    for chunk in chunks:
        digest.update(chunk)
    return base64.b64encode(digest.digest()).decode("ascii")


def sha256_b64(chunks: Iterable[bytes]) -> str:
    return b64_digest(chunks, "sha256")


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file at ``path`` (wheel file names, downloads, index entries)."""
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def file_chunks(path: Path) -> Iterable[bytes]:
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            yield chunk


def digest_folder(variant_dir: Path, algorithm: str = "sha256",
                  refuse: Callable[[Refusal], Exception] | None = None) -> dict[str, str]:
    """``{relpath: base64 hash}`` over a variant folder, as metadata.json records it,
    through the one walk of a folder from outside (``confine.regular_files``): links only
    inside the folder, no FIFO, socket or device (``refuse`` makes the error; a
    VariantError naming the entry by default)."""
    def refused(refusal: Refusal) -> Exception:
        if refuse is not None:
            return refuse(refusal)
        return VariantError(refusal.message(f"{variant_dir.name}/{refusal.relpath}", "the variant folder",
                                            "hash it"))

    return {relpath: b64_digest(file_chunks(path), algorithm)
            for path, relpath in regular_files(variant_dir, variant_dir, refused) if is_digested(relpath)}
