"""A git repository of a Hub kernel: a local path, or a URL (cloned bare into a cache).

Files are read at the pinned commit, blob by blob, exactly as committed; the working
tree, if any, is never touched.
"""

from __future__ import annotations

import base64
import hashlib
import os
import posixpath
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlsplit, urlunsplit

from ..cache import cache_dir
from ..errors import NetworkError, RepoNotFoundError, RevisionNotFoundError, SourceError
from ..kernel.revision import Revision
from ..kernel.versions import VersionRequest, describe_versions, ref_for_request, releases_around
from ..network import MIN_RATE, NetworkSettings
from ..redaction import redact
from . import FetchedVariant
from .urls import canonical_git_url

#: Rounds of fetching the targets of symbolic links (a link to a link to a file...).
_MAX_LINK_ROUNDS = 8


def is_git_repository(path: Path) -> bool:
    if not path.is_dir():
        return False
    proc = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return False
    # Only the repository's own top: a folder inside some other checkout is a folder.
    top = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True).stdout.strip()
    return not top or Path(top).resolve() == path.resolve()


def _without_credentials(url: str) -> tuple[str, str | None]:
    """(``url`` without its user and password, the Basic Authorization header they make,
    or None when it has none)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or (parts.username is None and parts.password is None):
        return url, None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")), f"Authorization: Basic {basic}"


def _copy(source: IO[bytes], out: IO[bytes], size: int, path: str) -> None:
    while size:
        chunk = source.read(min(size, 1 << 20))
        if not chunk:
            raise SourceError(f"git cat-file stopped while reading {path}")
        out.write(chunk)
        size -= len(chunk)


def _shown(text: str) -> str:
    """A URL or git's message as shown: a URL's user part masked (``https://***@host/``)."""
    return redact(text, userinfo="***@")


class GitSource:
    def __init__(self, location: str, *, local: bool, network: NetworkSettings | None = None) -> None:
        self.network = network or NetworkSettings.from_environment()
        self.location = location
        self.display = _shown(location)
        self.name = location.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
        self._git_dir = Path(location) if local else None
        self.fetch_downloads = False  # a URL is cloned while resolving, before fetch

    @property
    def git_dir(self) -> Path:
        """The repository; a URL is cloned (or fetched) on first use, not on opening, so
        that bad options and output folders are reported before any network work."""
        if self._git_dir is None:
            self._git_dir = self._clone(self.location)
        return self._git_dir

    # -- git plumbing -------------------------------------------------------------
    def _git(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(["git", "-C", str(self.git_dir), *args],
                              capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise SourceError(f"git {args[0]} failed in {self.display}: "
                              f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
        return proc.stdout

    def _clone(self, url: str) -> Path:
        """A bare mirror in the cache; fetched again on every run to see new refs.

        Credentials in the URL (``https://user:token@host/...``) never reach git's argv
        (which every local user can read in ``ps``) nor the mirror's config: git gets the
        URL without them, and an Authorization header for that URL only through its
        environment (``GIT_CONFIG_*``), so a redirect to another host goes without it."""
        clean, header = _without_credentials(url)
        target = cache_dir("git") / hashlib.sha256(clean.encode()).hexdigest()[:16]
        # A server that stalls below 1 kB/s for the timeout aborts the transfer.
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1",
               "GIT_HTTP_LOW_SPEED_LIMIT": str(MIN_RATE),
               "GIT_HTTP_LOW_SPEED_TIME": str(max(1, int(self.network.timeout)))}
        if header is not None:
            env.update({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"http.{clean}.extraHeader",
                        "GIT_CONFIG_VALUE_0": header})
        if (target / "HEAD").exists():
            cmd = ["git", "-C", str(target), "fetch", "-q", "--prune", "--tags", "origin",
                   "+refs/heads/*:refs/heads/*"]
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            cmd = ["git", "clone", "-q", "--bare", clean, str(target)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                  timeout=self.network.timeout * 20)
        except subprocess.TimeoutExpired:
            raise NetworkError(f"cannot clone {_shown(url)}: no progress within "
                               f"{self.network.timeout * 20:g} s") from None
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["(no output)"]
            detail = next((ln.removeprefix("fatal: ") for ln in lines if ln.startswith("fatal:")),
                          lines[-1])
            text = proc.stderr.lower()
            if any(hint in text for hint in ("not found", "does not appear", "does not exist")):
                raise RepoNotFoundError(f"git repository {_shown(url)} not found: {_shown(detail)}")
            raise SourceError(f"cannot clone {_shown(url)}: {_shown(detail)}")
        return target

    def _refs(self) -> tuple[dict[str, str], list[str]]:
        """({tag: the commit it points at}, branch names), in one git call."""
        out = self._git("for-each-ref", "--format=%(refname) %(objectname) %(*objectname)",
                        "refs/tags", "refs/heads")
        tags: dict[str, str] = {}
        branches: list[str] = []
        for line in out.splitlines():
            ref, target, *peeled = line.split()
            if ref.startswith("refs/tags/"):
                tags[ref.removeprefix("refs/tags/")] = peeled[0] if peeled else target
            else:
                branches.append(ref.removeprefix("refs/heads/"))
        return tags, branches

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """({tag: commit}, {branch: commit})."""
        tags, branches = self._refs()
        return tags, {branch: commit for branch in branches if (commit := self._commit(branch))}

    def _commit(self, ref: str) -> str | None:
        out = self._git("rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False).strip()
        return out or None

    # -- KernelSource -------------------------------------------------------------
    def resolve(self, request: VersionRequest | None) -> Revision:
        tags, branches = self._refs()
        ref = ref_for_request(request, tags, branches, default="HEAD", where=self.display)
        commit = self._commit(ref)
        if commit is None:
            raise RevisionNotFoundError(
                f"revision '{ref}' not found in {self.display}; "
                f"versions that exist: {describe_versions([*tags, *branches])}")
        commit_time = self._commit_time(commit)
        release, earlier = releases_around(commit, commit_time, tags, self._commit_time,
                                           self.display)
        return Revision(request.text if request else ref, ref, commit, commit_time,
                        self._canonical_url(), release, earlier)

    def _commit_time(self, commit: str) -> int:
        return int(self._git("show", "-s", "--format=%ct", commit).strip())

    def _canonical_url(self) -> str | None:
        """The remote's canonical URL; a local repository is known by its ``origin``."""
        if not Path(self.location).exists():
            return canonical_git_url(self.location)
        origin = self._git("config", "--get", "remote.origin.url", check=False).strip()
        return canonical_git_url(origin) if origin else None

    def variant_names(self, revision: Revision) -> list[str]:
        assert revision.commit is not None
        out = self._git("ls-tree", "--name-only", "-d", f"{revision.commit}:build", check=False)
        names = sorted(n for n in out.split("\n") if n)
        if not names:
            raise SourceError(f"{self.display} has no build/ folder at {revision.commit[:12]}")
        return names

    def fetch(self, revision: Revision, names: list[str],
              workdir: Path) -> Iterator[tuple[str, FetchedVariant]]:
        assert revision.commit is not None
        self._extract(revision.commit, [f"build/{name}" for name in names], workdir)
        for name in names:
            yield name, FetchedVariant(workdir / "build" / name, workdir)

    def _extract(self, commit: str, paths: list[str], workdir: Path) -> None:
        """Write the files under ``paths`` at ``commit`` into ``workdir`` exactly as they
        were committed. Blobs are read with ``cat-file``, not ``git archive``, so no
        ``.gitattributes`` rule (export-ignore, export-subst, eol) drops or changes a
        file; the targets of symbolic links elsewhere in the repository come along
        (the layout then decides whether a link may be followed)."""
        done: set[str] = set()
        with subprocess.Popen(["git", "-C", str(self.git_dir), "cat-file", "--batch"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) as blobs:
            assert blobs.stdin is not None and blobs.stdout is not None
            for _ in range(_MAX_LINK_ROUNDS):
                links = []
                for mode, sha, path in self._tree(commit, paths):
                    if path in done:
                        continue
                    done.add(path)
                    if mode == "160000":
                        raise SourceError(f"{path} is a git submodule: its files are not in "
                                          f"{self.display} at {commit[:12]}; refusing to convert "
                                          "without them")
                    blobs.stdin.write(sha.encode() + b"\n")
                    blobs.stdin.flush()
                    header = blobs.stdout.readline().split()
                    if len(header) != 3:
                        raise SourceError(f"git cat-file cannot read {path} in {self.display}")
                    left = int(header[2])
                    target = workdir / path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if mode == "120000":
                        link = os.fsdecode(blobs.stdout.read(left))
                        os.symlink(link, target)
                        links.append(posixpath.normpath(posixpath.join(posixpath.dirname(path),
                                                                       link)))
                    else:
                        with target.open("wb") as out:
                            _copy(blobs.stdout, out, left, path)
                    blobs.stdout.read(1)  # the newline after each object
                # Links leading out of the repository are written as they are; the layout
                # refuses them by name.
                paths = [p for p in links if not p.startswith(("/", "../")) and p != ".."]
                if not paths:
                    break
            blobs.stdin.close()

    def _tree(self, commit: str, paths: list[str]) -> list[tuple[str, str, str]]:
        """``(mode, sha, path)`` of every file under ``paths`` at ``commit``."""
        proc = subprocess.run(["git", "--literal-pathspecs", "-C", str(self.git_dir), "ls-tree",
                               "-r", "-z", "--full-tree", commit, "--", *paths],
                              capture_output=True)
        if proc.returncode != 0:
            lines = proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["?"]
            raise SourceError(f"git ls-tree failed in {self.display}: {lines[-1]}")
        entries = []
        for record in proc.stdout.split(b"\0"):
            if not record:
                continue
            meta, _, raw = record.partition(b"\t")
            mode, _kind, sha = meta.decode().split()
            path = os.fsdecode(raw)
            if any(part in ("", ".", "..") for part in path.split("/")):
                shown = raw.decode("utf-8", "backslashreplace").encode("unicode_escape").decode()
                raise SourceError(f"{self.display} holds a file named '{shown}' at {commit[:12]}, "
                                  "which is not a valid path (an empty, '.' or '..' part); "
                                  "refusing to convert it")
            entries.append((mode, sha, path))
        return entries

    def card(self, revision: Revision) -> str | None:
        for name in ("README.md", "CARD.md"):
            text = self._git("show", f"{revision.commit}:{name}", check=False)
            if text:
                return text
        return None
