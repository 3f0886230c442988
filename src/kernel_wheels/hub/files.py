"""A Hub repository's files, downloaded into the ordinary HF cache with one GET each.

``hf_hub_download`` asks for each file's metadata with a HEAD request before its GET, to
learn the ETag, size and redirect. The tree listing of a variant already tells all of
that, so here each file is fetched with a single GET, through huggingface_hub's own HTTP
client, URL and headers (HF_ENDPOINT, HF_TOKEN and timeouts apply as to every other
call), and placed exactly where ``hf_hub_download`` puts it, following the documented
cache layout: the content in ``blobs/<etag>``, a relative link to it at
``snapshots/<commit>/<path>``, written under the same per-blob lock file. A later
``hf_hub_download``, ``snapshot_download`` or HF_HUB_OFFLINE=1 run finds it there.

Why not just call ``hf_hub_download``: half the requests. A Hub that rate-limits its
/resolve calls counts half as many, and a mirror that reads a file to answer its HEAD
(olah does) does half the work: measured through olah, a HEAD on a 48 MB file costs a
fifth of its GET. And every file is checked against the listing before it enters the
cache (size, then sha256 for LFS files or the git blob id for the others), so a short or
corrupted transfer never becomes a cached blob that later runs would trust.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..confine import commit_id, file_name, inside, ref_name, shown
from ..errors import SourceError
from ..kernel.arrival import Arrival
from ..progress import readable_size

LANDING = 1 << 20


class TransferMismatch(Exception):
    """A file arrived whole but not as the listing describes it (size or digest)."""


class TransferStopped(Exception):
    """The run is over (interrupted, or failed elsewhere): the transfer was abandoned."""


@dataclass(frozen=True)
class RemoteFile:
    """A file of the repository at one commit, as its tree listing describes it (every
    field checked by :mod:`.answers`: the path is a plain relative path, the ids are
    hex digests)."""

    path: str  # in the repository, e.g. build/<variant>/_ops.py
    size: int
    blob_id: str  # the git object id (of the LFS pointer, for an LFS file)
    lfs_sha256: str | None  # the content's sha256, for an LFS (or Xet) file

    @property
    def etag(self) -> str:
        """The name the HF cache gives its blob: what the Hub's HEAD answers as the ETag
        (X-Linked-Etag, the sha256, for LFS files; the git blob id for the others)."""
        return self.lfs_sha256 or self.blob_id

    def digest(self) -> Any:
        """A hash object that, fed the content, gives :attr:`expected_digest`."""
        if self.lfs_sha256:
            return hashlib.sha256()
        blob = hashlib.sha1(usedforsecurity=False)
        blob.update(b"blob %d\0" % self.size)  # git hashes a header, then the content
        return blob

    @property
    def expected_digest(self) -> str:
        return self.lfs_sha256 or self.blob_id


def variant_lock_hash(files: Iterable[RemoteFile], variant: str) -> str:
    """What ``kernels lock`` records for a variant (hash type ``git_lfs_concat``): sha256
    over its files sorted by path, each as the path relative to ``build/<variant>/`` in
    UTF-8 followed by the raw bytes of its git blob id, or of its sha256 for an LFS file.
    Computed from the listing alone: nothing needs to be downloaded to compare."""
    prefix = f"build/{variant}/"
    entries = sorted((file.path.removeprefix(prefix).encode("utf-8"), file.expected_digest)
                     for file in files)
    digest = hashlib.sha256()
    for name, object_id in entries:
        digest.update(name)
        digest.update(bytes.fromhex(object_id))
    return f"sha256-{digest.hexdigest()}"


def check_space(folder: Path, needed: int, what: str) -> None:
    """A download that cannot fit fails before it starts, not at the disk's last byte."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise SourceError(f"{what}: needs {readable_size(needed)} in the HF cache ({folder.parent}), "
                          f"only {readable_size(free)} free there (HF_HOME, HF_HUB_CACHE)")


@dataclass(frozen=True)
class HubCacheRepo:
    """One repository's folder in the HF cache (``<HF_HUB_CACHE>/<type>s--org--name``)
    and its lock folder (``<HF_HUB_CACHE>/.locks/<type>s--org--name``)."""

    folder: Path
    locks: Path

    def pointer(self, commit: str, path: str) -> Path:
        """``snapshots/<commit>/<path>``, proven to stay inside this repository's folder
        (the commit and the path come from the Hub's answers)."""
        where = f"{self.folder.name}: snapshot {shown(commit, 64)}"
        return inside(self.folder / "snapshots", f"{commit_id(commit, where)}/{path}", where)

    def blob(self, file: RemoteFile) -> Path:
        return inside(self.folder / "blobs", file_name(file.etag, f"{self.folder.name}: a blob"),
                      f"{self.folder.name}: blob of {file.path}")

    def remember_ref(self, ref: str, commit: str) -> None:
        """``refs/<ref>``: lets an offline run resolve the tag or branch to ``commit``."""
        where = f"{self.folder.name}: ref {shown(ref, 64)}"
        target = inside(self.folder / "refs", ref_name(ref, where), where)
        commit_id(commit, where)
        if target.is_file() and target.read_text().strip() == commit:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temp.write_text(commit)
        os.replace(temp, target)

    def fetch(self, file: RemoteFile, commit: str, url: str, headers: dict[str, str],
              arrival: Arrival | None = None, stop: threading.Event | None = None,
              on_bytes: Callable[[int], None] | None = None) -> Path:
        """``snapshots/<commit>/<path>``, downloaded unless the cache holds it already;
        ``arrival`` is told of every byte written, for a reader that follows the transfer;
        ``stop``, once set, abandons the transfer at its next chunk; ``on_bytes`` hears
        of every piece landed (a progress bar)."""
        from filelock import FileLock

        pointer = self.pointer(commit, file.path)
        if pointer.is_file():
            return pointer
        blob = self.blob(file)
        blob.parent.mkdir(parents=True, exist_ok=True)
        self.locks.mkdir(parents=True, exist_ok=True)
        with FileLock(self.locks / f"{file.etag}.lock"):
            if not blob.is_file():
                self._download(file, url, headers, blob, arrival, stop, on_bytes)
        self._link(pointer, blob)
        return pointer

    @staticmethod
    def _download(file: RemoteFile, url: str, headers: dict[str, str], blob: Path,
                  arrival: Arrival | None = None, stop: threading.Event | None = None,
                  on_bytes: Callable[[int], None] | None = None) -> None:
        """Stream ``url`` into ``blob`` through ``<blob>.incomplete`` (the name the HF
        cache uses for a transfer in progress; the lock makes it ours), hashing as it
        goes; only a file that matches the listing is moved into place."""
        from huggingface_hub import get_session, hf_raise_for_status

        partial = blob.with_name(blob.name + ".incomplete")
        digest, received, pending = file.digest(), 0, bytearray()
        try:
            with get_session().stream("GET", url, headers=headers, follow_redirects=True) as response, \
                    partial.open("wb") as out:
                hf_raise_for_status(response)
                if arrival is not None:
                    arrival.started(partial)

                def land() -> None:
                    nonlocal received
                    digest.update(pending)
                    out.write(pending)
                    received += len(pending)
                    if on_bytes is not None:
                        on_bytes(len(pending))
                    pending.clear()
                    if arrival is not None:
                        out.flush()  # the reader sees exactly what it is told
                        arrival.received(received)

                # Pieces as they come off the connection (at most 64 kB), so that a stop
                # is seen within one of them however slow the link; landed a MiB at a
                # time (per piece, the hashing, writes and the reader's wake-ups cost a
                # cold run 10%).
                for piece in response.iter_bytes():
                    if stop is not None and stop.is_set():
                        raise TransferStopped(file.path)
                    pending += piece
                    if len(pending) >= LANDING:
                        land()
                if pending:
                    land()
            name = file.path.rsplit("/", 1)[-1]
            if received != file.size:
                raise TransferMismatch(f"{name}: received {received} bytes, the listing says {file.size}")
            if digest.hexdigest() != file.expected_digest:
                raise TransferMismatch(f"{name}: the bytes received differ from the listing's "
                                       f"{'sha256' if file.lfs_sha256 else 'git blob id'}")
            os.replace(partial, blob)
        finally:
            partial.unlink(missing_ok=True)

    def _link(self, pointer: Path, blob: Path) -> None:
        """A relative link, as huggingface_hub makes it (the cache folder may move),
        made in the lock folder and renamed into place: a reader never sees half a link,
        and a converter listing the variant folder while its other files still arrive
        never sees a temporary name."""
        pointer.parent.mkdir(parents=True, exist_ok=True)
        target = os.path.relpath(blob, pointer.parent)
        name = f".{pointer.name}.{os.getpid()}.{threading.get_ident()}.link"
        for folder in (self.locks, pointer.parent):  # the second if the first is another disk
            temp = folder / name
            temp.unlink(missing_ok=True)
            temp.symlink_to(target)
            try:
                os.replace(temp, pointer)
                return
            except OSError as exc:
                temp.unlink(missing_ok=True)
                if exc.errno != errno.EXDEV or folder != self.locks:
                    raise
