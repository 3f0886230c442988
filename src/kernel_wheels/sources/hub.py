"""A kernel repository on the Hugging Face Hub (or a Hub-compatible server) as a source:
resolve a version request to a commit, list the variants under ``build/``, fetch the
selected ones, read the card. The Hub is asked through :mod:`kernel_wheels.hub` (its
client, retries, errors and the HF cache); what is here is what a source does with it.

Only the selected variants are downloaded, file by file at the pinned commit, into the
ordinary HF cache (:mod:`kernel_wheels.hub.files`), so a second run downloads nothing and
HF_HUB_OFFLINE=1 converts from the cache.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..cache import read_commit_time, write_commit_time
from ..errors import LockError, RevisionNotFoundError, SourceError
from ..hub.client import open_client
from ..hub.files import HubCacheRepo, RemoteFile, check_space, variant_lock_hash
from ..hub.repository import HubRepository
from ..kernel.arrival import Arrival
from ..kernel.repo_id import hub_url
from ..kernel.revision import Revision
from ..kernel.versions import VersionRequest, describe_versions, ref_for_request, releases_around
from ..network import NetworkSettings
from ..progress import SILENT_TASK, Task, as_progress, readable_size
from . import FetchedVariant

# A variant's listing and the files the converter reads before writing (metadata.json,
# Python sources) are fetched a few variants at a time; the rest (the binaries) two at a
# time, in the order the variants were handed on, and read by the converter as they land
# (``kernel.arrival``). Measured cold, 4 x 48 MB through olah, when each variant was converted
# only once complete (medians of 6): large files 1 or 2 at a time 5.04 s, 3 at a time
# 5.40 s, 4 at a time 6.06 s; two, not one, so that a real Hub's CDN gets parallel streams.
# Read as they land, the same run takes as long as a plain download of its files (4.31
# vs 4.30 s, medians of 5): only the last block is compressed after the last byte.
_STREAMS = 2
_VARIANTS_AT_ONCE = 3
_READ_FIRST = (".json", ".py", ".md", ".txt", ".sigstore")
_CARDS = ("README.md", "CARD.md")
#: A card larger than this is not a kernel's README: left out of the wheel's description.
_MAX_CARD = 1 << 20


@dataclass(frozen=True)
class _Transfer:
    """A file of a variant handed on before it is here."""

    variant: str
    file: RemoteFile
    arrival: Arrival
    done: Callable[[], None]  # says "downloaded build/<variant>" after the last file
    task: Task = SILENT_TASK  # the variant's download bar


class HubSource:
    def __init__(self, repo_id: str, *, repo_type: str | None = None,
                 network: NetworkSettings | None = None,
                 progress: Callable[[str], None] = lambda _: None,
                 locked_variants: Mapping[str, str] | None = None) -> None:
        """``locked_variants``: {variant: ``kernels.lock``'s hash}; when given, a variant is
        fetched only if the listing it is downloaded from hashes to what was locked."""
        self.locked_variants = locked_variants
        self.progress = as_progress(progress)
        self.repository = HubRepository(open_client(network, self.progress), repo_id, repo_type)
        self.repo_id = repo_id
        self.name = repo_id.split("/")[-1]
        #: The distribution name of its wheels: the repository's (as the removed `kernels
        #: to-wheel` named them, and as `serve` lists them before any metadata.json is
        #: read), whatever metadata.json calls the kernel; the import name is the kernel's.
        self.distribution: str | None = canonicalize_name(self.name)
        self.display = repo_id
        self.offline = self.repository.offline
        self.fetch_downloads = not self.offline

    def publisher_trust(self) -> tuple[str, bool | None]:
        """The repository's owner and the Hub's ``trustedKernelPublisher`` flag for it
        (:meth:`~kernel_wheels.hub.client.HubClient.publisher_flag`)."""
        publisher = self.repo_id.split("/", 1)[0]
        return publisher, self.repository.client.publisher_flag(publisher)

    # -- resolution ---------------------------------------------------------------
    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """({tag: commit}, {branch: commit}) of the repository (offline: from the HF cache)."""
        return self.repository.refs()

    def resolve(self, request: VersionRequest | None) -> Revision:
        try:
            return self._resolve(request, *self.refs())
        except RevisionNotFoundError as exc:
            if not self.offline:
                raise
            raise RevisionNotFoundError(f"HF_HUB_OFFLINE=1: {exc.message} (offline, only the versions "
                                        "in the HF cache are known)") from None

    def _resolve(self, request: VersionRequest | None, tags: dict[str, str],
                 branches: dict[str, str]) -> Revision:
        ref = ref_for_request(request, tags, list(branches), default="main", where=self.repo_id)
        commit = tags.get(ref) or branches.get(ref)
        if commit is None:
            commit = self._commit_of(ref, [*tags, *branches])
        commit_time = self._commit_time(commit)
        release, earlier = releases_around(commit, commit_time, tags, self._tag_commit_time,
                                           self.repo_id)
        return Revision(request.text if request else ref, ref, commit, commit_time,
                        hub_url(self.repo_id, self.repository.repo_type), release, earlier)

    def _tag_commit_time(self, commit: str) -> int | None:
        when = self._commit_time(commit)
        if when is None and self.offline:
            # Online, these times are fetched and remembered; offline, a missing one would
            # silently change the snapshot's version, and so its bytes.
            raise SourceError(f"HF_HUB_OFFLINE=1: the release history of {self.repo_id} is not "
                              "in the cache (convert this revision once online first)")
        return when

    def _commit_of(self, ref: str, known: list[str]) -> str:
        if self.offline:
            if re.fullmatch(r"[0-9a-f]{40}", ref):
                return ref
            raise SourceError(f"HF_HUB_OFFLINE=1: revision '{ref}' of {self.repo_id} is not in "
                              "the cache")
        if not re.fullmatch(r"[0-9a-f]{7,40}", ref):
            raise RevisionNotFoundError(f"revision '{ref}' not found in {self.repo_id}; versions "
                                        f"that exist: {describe_versions(known)}")
        return self.repository.commit_of(ref, known)

    def _commit_time(self, commit: str) -> int | None:
        """The commit's time (zip timestamps, branch versions); remembered per commit so
        that an offline conversion gives the same bytes as the online one."""
        if (known := read_commit_time(commit)) is not None:
            return known
        if self.offline:
            return None
        when = self.repository.commit_time(commit)
        if when is not None:
            write_commit_time(commit, when)
        return when

    # -- files --------------------------------------------------------------------
    def variant_names(self, revision: Revision) -> list[str]:
        commit = revision.commit
        assert commit is not None
        names = self.repository.builds(commit)
        if not names:
            raise SourceError(self.repository.no_build_folder(commit, names))
        return names

    def variant_files(self, revision: Revision, name: str) -> list[RemoteFile]:
        """The files of ``build/<name>`` at the revision's commit, as the Hub lists them."""
        commit = revision.commit
        assert commit is not None
        return self.repository.files(f"build/{name}", commit)

    def check_lock(self, name: str, commit: str, files: list[RemoteFile]) -> None:
        """Refuse a variant whose listing does not hash to what kernels.lock recorded."""
        if self.locked_variants is None:
            return
        expected = self.locked_variants.get(name)
        if expected is None:
            raise LockError(f"{self.repo_id}: build/{name} at {commit[:12]} is not in kernels.lock; "
                            "refusing to convert what was not locked (lock it again, or leave it "
                            "out with --variant/--backend/--torch)")
        actual = variant_lock_hash(files, name)
        if actual != expected:
            raise LockError(f"{self.repo_id}: build/{name} at {commit[:12]} hashes to {actual}, "
                            f"kernels.lock says {expected}; refusing to convert files that are not "
                            "what was locked")

    def fetch(self, revision: Revision, names: list[str],
              workdir: Path) -> Iterator[tuple[str, FetchedVariant]]:
        """Each variant's files, listed at the pinned commit and downloaded into the HF
        cache (:mod:`kernel_wheels.hub.files`). A variant is handed on as soon as the files
        read before writing are here, its binaries still arriving
        (:mod:`kernel_wheels.kernel.arrival`: the converter reads them as they land); the
        generator ends when every download is over, raising the first that failed."""
        commit = revision.commit
        assert commit is not None
        if self.offline:  # what snapshot_download would answer offline, without its imports
            snapshot = self.repository.snapshot(commit)
            for name in names:
                yield name, FetchedVariant(snapshot / "build" / name, snapshot.parent.parent)
            return
        cache = self.repository.cache()
        # The HF cache records the ref, so that an offline run (HF_HUB_OFFLINE=1) resolves
        # it; every byte is fetched by commit, so a ref that moves meanwhile changes nothing.
        if revision.ref and revision.ref != commit:
            cache.remember_ref(revision.ref, commit)
        transfers: list[Future[None]] = []
        stop = threading.Event()  # set when the run ends early: downloads stop mid-file
        with ThreadPoolExecutor(max_workers=_VARIANTS_AT_ONCE) as pool, \
                ThreadPoolExecutor(max_workers=_STREAMS) as streams:
            futures = {pool.submit(self._fetch_first, name, commit, cache): name for name in names}
            try:
                for future in as_completed(futures):
                    fetched, pending = future.result()
                    # Queued in the order the variants are handed on, which is the order
                    # the converter's workers take them in: each reads what is arriving.
                    transfers += [streams.submit(self._fetch_arriving, commit, cache, transfer, stop)
                                  for transfer in pending]
                    yield futures[future], fetched
                for transfer in as_completed(transfers):
                    transfer.result()
            finally:
                stop.set()  # over, or abandoned (Ctrl-C, an error): nothing more to fetch
                for variant_future in futures:
                    variant_future.cancel()
                for transfer in transfers:
                    transfer.cancel()

    def _fetch_first(self, name: str, commit: str,
                     cache: HubCacheRepo) -> tuple[FetchedVariant, list[_Transfer]]:
        """List the variant and download the files read before writing; the others are
        returned, each with the :class:`Arrival` a reader follows, for
        :meth:`_fetch_arriving`."""
        what = f"downloading build/{name}"
        listed = self.repository.files(f"build/{name}", commit)
        self.check_lock(name, commit, listed)
        files = sorted(listed, key=lambda f: (f.size, f.path))
        missing = [f for f in files if not cache.pointer(commit, f.path).is_file()]
        check_space(cache.folder, sum(f.size for f in missing), what)
        # Read by the converter as they arrive: every file but the ones it reads before
        # writing (metadata.json, Python sources), which are downloaded first.
        first = [f for f in missing if f.path.endswith(_READ_FIRST)]
        later = [f for f in missing if not f.path.endswith(_READ_FIRST)]
        task = self.progress.task(f"build/{name}", sum(f.size for f in missing), "B") \
            if missing else SILENT_TASK
        done = self._downloaded_once(name, missing, len(later), task)
        for file in first:
            self.repository.download(what, file, commit, cache, on_bytes=task.advance)
        done()
        prefix = f"build/{name}/"
        pending = [_Transfer(name, f, Arrival(cache.pointer(commit, f.path), f.size), done, task)
                   for f in later]
        arriving = {t.file.path.removeprefix(prefix): t.arrival for t in pending}
        return FetchedVariant(cache.pointer(commit, f"build/{name}"), cache.folder, arriving), pending

    def _fetch_arriving(self, commit: str, cache: HubCacheRepo, transfer: _Transfer,
                        stop: threading.Event) -> None:
        file, arrival = transfer.file, transfer.arrival
        try:
            self.repository.download(f"downloading build/{transfer.variant}", file, commit, cache,
                                     arrival, stop, transfer.task.advance)
        except BaseException:
            arrival.failed()
            raise
        arrival.finished()
        transfer.done()

    def _downloaded_once(self, name: str, missing: list[RemoteFile], parts: int,
                         task: Task = SILENT_TASK) -> Callable[[], None]:
        """A callable that says "downloaded build/<name>: ..." when called for the last
        time: once for the files read first, then once per other file (``parts``)."""
        left, lock, started = parts + 1, threading.Lock(), time.monotonic()

        def one_done() -> None:
            nonlocal left
            with lock:
                left -= 1
                if left or not missing:
                    return
            task.finish()
            size = sum(f.size for f in missing)
            self.progress(f"downloaded build/{name}: {len(missing)} files, {readable_size(size)} "
                          f"in {time.monotonic() - started:.1f} s")
        return one_done

    def card(self, revision: Revision) -> str | None:
        """README.md (else CARD.md) at the commit; None when there is none or it cannot be
        read. Fetched like the variants' files (listed, then one GET checked against the
        listing into the HF cache), not with ``hf_hub_download``, which names the cached
        blob after the server's ETag header and so would write wherever a hostile server's
        ETag points."""
        commit = revision.commit
        assert commit is not None
        if self.offline:  # the cached copy, as hf_hub_download would answer offline
            for filename in _CARDS:
                if (cached := self.repository.snapshot(commit) / filename).is_file():
                    return cached.read_text("utf-8", errors="replace")
            return None
        try:
            by_name = {file.path: file for file in self.repository.files("", commit)}
            card = next((by_name[name] for name in _CARDS if name in by_name), None)
            if card is None or card.size > _MAX_CARD:
                return None
            path = self.repository.download("reading the card", card, commit, self.repository.cache())
        except SourceError:
            return None  # the card is optional: the wheel's description is then the default
        return path.read_text("utf-8", errors="replace")
