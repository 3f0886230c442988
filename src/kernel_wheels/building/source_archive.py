"""A dependency's tagged source archive (``cutlass-3.9.2.tar.gz``), downloaded once into
kernel-wheels' cache and checked against a pinned digest before any of it is used.

Every byte of the archive is hostile until its digest matches: it is streamed to a
temporary file under the cache (with a size limit and the network settings' timeouts),
its sha256 is compared with the pinned one, and only then is it unpacked, member by
member, refusing anything that is not a plain file, a folder or a link that stays
inside the tree (an absolute path, ``..``, a device, a link leading out). Where only
kernel-builder's pin exists (a Nix hash of the unpacked tree, ``sha256-<base64>``, as
``fetchFromGitHub`` computes it), the unpacked tree's NAR hash is compared instead. The
folders the build needs are then renamed into place together: a failed, refused or
interrupted download leaves nothing behind.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..confine import relative_path, shown
from ..errors import BuildError, UnsafeNameError
from ..network import NetworkSettings, TransferTooSlow, rate_guard
from ..progress import counted

Log = Callable[[str], None]
#: CUTLASS's archives are 20-30 MB packed and about 150 MB unpacked
MAX_ARCHIVE_BYTES = 1 << 30
MAX_UNPACKED_BYTES = 4 << 30
MAX_MEMBERS = 200_000


@dataclass(frozen=True)
class PinnedArchive:
    """One archive to fetch: where from, what it must hash to, which folders to keep."""

    url: str
    name: str  # "CUTLASS 3.9.2", for messages
    sha256: str | None  # of the archive file
    nar: str | None  # of the unpacked tree, "sha256-<base64>" (Nix)
    keep: tuple[str, ...]  # folders of the tree the build needs: "include", "tools/util/include"


# --- NAR: the Nix archive hash of a folder --------------------------------------------


class _NarHash:
    """sha256 of a folder's NAR serialisation (Nix's ``nix hash path``): entries sorted
    by name, only the executable bit of a file's mode, link targets as they are."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()

    def text(self, value: bytes) -> None:
        self.digest.update(len(value).to_bytes(8, "little"))
        self.digest.update(value)
        self.digest.update(b"\0" * (-len(value) % 8))

    def file(self, path: Path) -> None:
        size = path.stat().st_size
        self.digest.update(size.to_bytes(8, "little"))
        with path.open("rb") as stream:
            while chunk := stream.read(1 << 20):
                self.digest.update(chunk)
        self.digest.update(b"\0" * (-size % 8))

    def node(self, path: Path) -> None:
        self.text(b"(")
        self.text(b"type")
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            self.text(b"symlink")
            self.text(b"target")
            self.text(os.fsencode(os.readlink(path)))
        elif stat.S_ISDIR(mode):
            self.text(b"directory")
            for name in sorted(os.listdir(os.fsencode(path))):
                self.text(b"entry")
                self.text(b"(")
                self.text(b"name")
                self.text(name)
                self.text(b"node")
                self.node(path / os.fsdecode(name))
                self.text(b")")
        else:
            self.text(b"regular")
            if mode & stat.S_IXUSR:
                self.text(b"executable")
                self.text(b"")
            self.text(b"contents")
            self.file(path)
        self.text(b")")


def nar_hash(path: Path) -> str:
    """``sha256-<base64>``: the hash Nix's fetchers pin (``fetchFromGitHub``'s ``hash``)."""
    nar = _NarHash()
    nar.text(b"nix-archive-1")
    nar.node(path)
    return "sha256-" + base64.b64encode(nar.digest.digest()).decode()


# --- download ----------------------------------------------------------------------------


def _download(url: str, target: Path, name: str, settings: NetworkSettings) -> str:
    """Stream ``url`` to ``target``; returns the sha256. Retried like every remote call
    (a connection error, a stall, a 429 or 5xx answer); another answer is final."""
    import httpx2

    last: Exception | None = None
    for attempt in range(settings.retries + 1):
        if attempt:
            time.sleep(settings.delay(attempt))
        try:
            return _download_once(url, target, settings)
        except (httpx2.TransportError, TransferTooSlow, _RetryableStatus) as exc:
            last = exc
    raise BuildError(f"could not download {name} from {url} ({_why(last)}) after "
                     f"{counted(settings.retries + 1, 'try', 'tries')}")


class _RetryableStatus(Exception):
    pass


def _why(exc: Exception | None) -> str:
    text = str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else ""
    return shown(text or type(exc).__name__, 200)


def _download_once(url: str, target: Path, settings: NetworkSettings) -> str:
    import httpx2

    digest = hashlib.sha256()
    received = 0
    with httpx2.Client(timeout=settings.timeout, follow_redirects=True,
                       event_hooks={"response": [rate_guard(settings.timeout)]}) as client, \
            client.stream("GET", url) as response:
        if response.status_code >= 500 or response.status_code == 429:
            raise _RetryableStatus(f"HTTP {response.status_code}")
        if response.status_code != 200:
            raise BuildError(f"could not download {url} (HTTP {response.status_code})")
        with target.open("wb") as sink:
            for chunk in response.iter_bytes(1 << 20):
                received += len(chunk)
                if received > MAX_ARCHIVE_BYTES:
                    raise BuildError(f"{url} is larger than {MAX_ARCHIVE_BYTES >> 20} MiB: "
                                     "refusing it")
                digest.update(chunk)
                sink.write(chunk)
    return digest.hexdigest()


# --- unpacking -------------------------------------------------------------------------


def _member_path(member: tarfile.TarInfo, top: list[str], where: str) -> str | None:
    """The member's path inside the tree (the archive's one top folder stripped), or
    None for the top folder itself and for pax headers."""
    if member.type in (tarfile.XGLTYPE, tarfile.XHDTYPE):
        return None
    path = relative_path(member.name.rstrip("/"), where)
    if not top:
        top.append(path.parts[0])
    if path.parts[0] != top[0]:
        raise UnsafeNameError(f"{where}: '{shown(member.name)}' is outside the archive's one "
                              f"top folder '{shown(top[0])}'")
    return "/".join(path.parts[1:]) or None


def _check_link(member: tarfile.TarInfo, inner: str, where: str) -> None:
    """A symbolic link must lead to a place inside the tree."""
    target = member.linkname
    if not target or target.startswith("/"):
        raise UnsafeNameError(f"{where}: '{shown(inner)}' links to '{shown(target)}', outside "
                              "the archive")
    depth = len(inner.split("/")) - 1
    for part in target.split("/"):
        depth += -1 if part == ".." else 0 if part in ("", ".") else 1
        if depth < 0:
            raise UnsafeNameError(f"{where}: '{shown(inner)}' links to '{shown(target)}', outside "
                                  "the archive")


def unpack(archive: Path, tree: Path, where: str) -> None:
    """Unpack ``archive`` into the new folder ``tree``, refusing what could leave it."""
    tree.mkdir()
    total = 0
    top: list[str] = []
    try:
        with tarfile.open(archive, "r:*") as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise BuildError(f"{where} has more than {MAX_MEMBERS} members: refusing it")
                inner = _member_path(member, top, where)
                if inner is None:
                    continue
                destination = tree / inner
                if member.isdir():
                    destination.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    total += member.size
                    if total > MAX_UNPACKED_BYTES:
                        raise BuildError(f"{where} unpacks to more than {MAX_UNPACKED_BYTES >> 30} "
                                         "GiB: refusing it")
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    assert source is not None
                    with source, destination.open("xb") as sink:
                        shutil.copyfileobj(source, sink, 1 << 20)
                    destination.chmod(0o755 if member.mode & 0o100 else 0o644)
                elif member.issym():
                    _check_link(member, inner, where)
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    destination.symlink_to(member.linkname)
                else:
                    kind = "a hard link" if member.islnk() else "a device or pipe"
                    raise UnsafeNameError(f"{where}: '{shown(member.name)}' is {kind}; refusing the "
                                          "archive")
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, FileExistsError):
            raise UnsafeNameError(f"{where}: '{shown(str(exc.filename))}' appears twice (or through "
                                  "a link); refusing the archive") from None
        raise BuildError(f"{where} is not a readable tar archive ({_why(exc)})") from None


# --- the whole fetch ----------------------------------------------------------------------


def fetch(pin: PinnedArchive, target: Path, log: Log,
          settings: NetworkSettings | None = None) -> None:
    """Download, check and unpack ``pin`` so that ``target`` holds its ``keep`` folders.
    ``target`` appears whole or not at all."""
    settings = settings or NetworkSettings.from_environment()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as temp:
        work = Path(temp)
        archive = work / "archive"
        log(f"downloading {pin.name} from {pin.url}")
        found = _download(pin.url, archive, pin.name, settings)
        if pin.sha256 is not None and found != pin.sha256:
            raise BuildError(f"{pin.url} has sha256 {found}, not the pinned {pin.sha256}: "
                             f"refusing to build with it")
        tree = work / "tree"
        try:
            unpack(archive, tree, f"{pin.name} archive from {pin.url}")
        except UnsafeNameError as exc:
            raise BuildError(exc.message) from None
        if pin.sha256 is None:
            assert pin.nar is not None
            tree_hash = nar_hash(tree)
            if tree_hash != pin.nar:
                raise BuildError(f"{pin.url} unpacks to a tree with Nix hash {tree_hash}, not the "
                                 f"pinned {pin.nar}: refusing to build with it")
        kept = work / "kept"
        for folder in pin.keep:
            source = tree / folder
            if source.is_dir():
                (kept / folder).parent.mkdir(parents=True, exist_ok=True)
                source.rename(kept / folder)
        if not kept.is_dir():
            raise BuildError(f"{pin.name} archive from {pin.url} has none of "
                             f"{', '.join(pin.keep)}: is it a {pin.name} source archive?")
        try:
            kept.rename(target)  # atomic: a half-unpacked folder is never seen
        except OSError:
            if not target.is_dir():  # another build won the race: use its copy
                raise
