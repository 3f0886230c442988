"""A git repository of a Hub kernel: a local path, or a URL (cloned bare into a cache).

Files are read at the pinned commit with ``git archive``; the working tree, if any,
is never touched.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
from pathlib import Path

from ..cache import cache_dir
from ..errors import RepoNotFoundError, RevisionNotFoundError, SourceError
from ..revision import Revision
from ..versions import VersionRequest, describe_versions, ref_for_request
from . import FetchedVariant


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


class GitSource:
    def __init__(self, location: str, *, local: bool) -> None:
        self.location = location
        self.display = location
        self.name = location.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
        if local:
            self.git_dir = Path(location)
        else:
            self.git_dir = self._clone(location)

    # -- git plumbing -------------------------------------------------------------
    def _git(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(["git", "-C", str(self.git_dir), *args],
                              capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise SourceError(f"git {args[0]} failed in {self.display}: "
                              f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
        return proc.stdout

    def _clone(self, url: str) -> Path:
        """A bare mirror in the cache; fetched again on every run to see new refs."""
        target = cache_dir("git") / hashlib.sha256(url.encode()).hexdigest()[:16]
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1"}
        if (target / "HEAD").exists():
            cmd = ["git", "-C", str(target), "fetch", "-q", "--prune", "--tags", "origin",
                   "+refs/heads/*:refs/heads/*"]
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            cmd = ["git", "clone", "-q", "--bare", url, str(target)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["(no output)"]
            detail = next((ln.removeprefix("fatal: ") for ln in lines if ln.startswith("fatal:")),
                          lines[-1])
            text = proc.stderr.lower()
            if any(hint in text for hint in ("not found", "does not appear", "does not exist")):
                raise RepoNotFoundError(f"git repository {url} not found: {detail}")
            raise SourceError(f"cannot clone {url}: {detail}")
        return target

    def _refs(self) -> tuple[list[str], list[str]]:
        out = self._git("for-each-ref", "--format=%(refname)", "refs/tags", "refs/heads")
        tags, branches = [], []
        for ref in out.split():
            if ref.startswith("refs/tags/"):
                tags.append(ref.removeprefix("refs/tags/"))
            else:
                branches.append(ref.removeprefix("refs/heads/"))
        return tags, branches

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
                f"versions that exist: {describe_versions(tags + branches)}")
        commit_time = int(self._git("show", "-s", "--format=%ct", commit).strip())
        url = self.location if not Path(self.location).exists() else None
        if url and url.startswith("https://huggingface.co/"):
            url = f"{url.removesuffix('.git')}/tree/{commit}"
        return Revision(request.text if request else ref, ref, commit, commit_time, url)

    def variant_names(self, revision: Revision) -> list[str]:
        assert revision.commit is not None
        out = self._git("ls-tree", "--name-only", "-d", f"{revision.commit}:build", check=False)
        names = sorted(n for n in out.split("\n") if n)
        if not names:
            raise SourceError(f"{self.display} has no build/ folder at {revision.commit[:12]}")
        return names

    def fetch(self, revision: Revision, names: list[str], workdir: Path) -> dict[str, FetchedVariant]:
        assert revision.commit is not None
        paths = [f"build/{name}" for name in names]
        proc = subprocess.Popen(
            ["git", "-C", str(self.git_dir), "archive", "--format=tar", revision.commit, "--",
             *paths], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
            archive.extractall(workdir, filter="data")
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        if proc.wait() != 0:
            raise SourceError(f"git archive failed in {self.display}: {stderr.strip()}")
        return {name: FetchedVariant(workdir / "build" / name, workdir) for name in names}

    def card(self, revision: Revision) -> str | None:
        for name in ("README.md", "CARD.md"):
            text = self._git("show", f"{revision.commit}:{name}", check=False)
            if text:
                return text
        return None
