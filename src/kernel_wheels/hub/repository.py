"""One repository on the Hub, through a :class:`~.client.HubClient`: its refs, the commit a
ref names and when it was made, the tree listings of its folders, its files downloaded
into the ordinary HF cache. Offline (HF_HUB_OFFLINE=1), the HF cache answers what it can
(the refs and folders an earlier run left there), without loading the HTTP stack.

A repository is a ``kernel`` (the Hub's kernel type) or, for kernels published before
that type, a ``model``: unless told which, the first whose refs the Hub lists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from ..confine import commit_id
from ..errors import RepoNotFoundError, RevisionNotFoundError, SourceError
from ..kernel.arrival import Arrival
from ..kernel.versions import describe_versions, tag_version
from ..reading import read_text
from . import answers, session
from .client import HubClient, Missing
from .files import HubCacheRepo, RemoteFile

T = TypeVar("T")
REPO_TYPES = ("kernel", "model")


class HubRepository:
    def __init__(self, client: HubClient, repo_id: str, repo_type: str | None = None) -> None:
        self.client, self.repo_id = client, repo_id
        self.repo_types = (repo_type,) if repo_type else REPO_TYPES
        #: The type asked for; once the refs are known, the type that has them.
        self.repo_type: str = self.repo_types[0]

    @property
    def offline(self) -> bool:
        return self.client.offline

    def call(self, what: str, fn: Callable[[], T], missing: Missing | None = None) -> T:
        """``fn()`` through the client's retry loop, its failures named for this repository."""
        return self.client.call(what, fn, self.repo_id, self.repo_types, missing)

    # -- refs -------------------------------------------------------------------------
    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """({tag: commit}, {branch: commit}); picks the repository type that exists
        (offline: the refs the HF cache remembers)."""
        if self.offline:
            return self._cached_refs()
        last: SourceError | None = None
        for repo_type in self.repo_types:
            try:
                refs: Any = self.call("listing refs", partial(
                    self.client.api.list_repo_refs, self.repo_id, repo_type=repo_type),
                    missing=lambda: RepoNotFoundError(self.client.not_found(self.repo_id, self.repo_types)))
            except RepoNotFoundError as exc:
                last = exc
                continue
            self.repo_type = repo_type
            return answers.refs(refs, self.repo_id)
        assert last is not None
        raise last

    def release_tags(self) -> dict[str, str]:
        """{release tag (``vX.Y.Z``): commit}."""
        tags, _branches = self.refs()
        return {tag: commit for tag, commit in tags.items() if tag_version(tag) is not None}

    def _cached_refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """Offline: the refs the HF cache remembers (HF_HOME/hub/<repo>/refs/<name>)."""
        from huggingface_hub import constants

        for repo_type in self.repo_types:
            refs_dir = self._cache_folder(repo_type) / "refs"
            if refs_dir.is_dir():
                self.repo_type = repo_type
                refs = {name: commit_id(read_text(p, "a ref in the HF cache", SourceError, 4096).strip(),
                                        f"{self.repo_id}: ref {name} in the HF cache")
                        for p in refs_dir.rglob("*") if p.is_file()
                        and not (name := p.relative_to(refs_dir).as_posix()).startswith(".")}
                tags = {k: v for k, v in refs.items() if tag_version(k) is not None}
                return tags, {k: v for k, v in refs.items() if k not in tags}
        raise SourceError(f"HF_HUB_OFFLINE=1 and {self.repo_id} is not in the cache "
                          f"({constants.HF_HUB_CACHE}); convert it once online first")

    def commit_of(self, ref: str, known: list[str]) -> str:
        """The commit a ref (a branch, a tag, a commit id or its prefix) names; ``known``,
        the versions that exist, complete the error when there is none."""
        def missing() -> RevisionNotFoundError:
            return RevisionNotFoundError(f"revision '{ref}' not found in {self.repo_id}; versions "
                                         f"that exist: {describe_versions(known)}")

        info: Any = self.call("resolving the revision", lambda: self.client.api.repo_info(
            self.repo_id, revision=ref, repo_type=self.repo_type), missing=missing)
        return answers.revision_commit(info, f"{self.repo_id} at {ref}")

    def commit_time(self, commit: str) -> int | None:
        """When the commit was made (seconds), as the Hub says; None when it cannot say."""
        try:
            info: Any = self.call("reading the commit", lambda: self.client.api.repo_info(
                self.repo_id, revision=commit, repo_type=self.repo_type))
        except SourceError:
            return None
        modified = getattr(info, "last_modified", None)
        return None if modified is None else int(modified.timestamp())

    # -- tree listings ------------------------------------------------------------------
    def tree(self, folder: str, commit: str, recursive: bool = False) -> Iterator[list[dict[str, Any]]]:
        """The pages of the tree listing of ``folder`` at ``commit`` (the Hub's
        ``/api/<type>s/<repo>/tree/<commit>/<folder>``), as JSON (:meth:`HubClient.pages`)."""
        where = self._at(commit)
        path = f"/{quote(folder, safe='')}" if folder else ""
        for page in self.client.pages(
                f"/api/{self.repo_type}s/{self.repo_id}/tree/{quote(commit, safe='')}{path}",
                {"recursive": recursive, "expand": False}, where, folder or "the repository"):
            yield answers.tree_page(page, where)

    def builds(self, commit: str) -> list[str] | None:
        """The variant folders under ``build/`` at ``commit``, sorted; None when the Hub
        says there is no ``build/`` (and [] when it holds no folder)."""
        if self.offline:
            build = self.snapshot(commit) / "build"
            return sorted(p.name for p in build.iterdir() if p.is_dir()) if build.is_dir() else []
        try:
            return self.call("listing build/", lambda: answers.folder_names(
                self.tree("build", commit), "build", self._at(commit)), missing=_NoBuildFolder)
        except _NoBuildFolder:
            return None

    def no_build_folder(self, commit: str, builds: list[str] | None) -> str:
        """What a commit whose :meth:`builds` are none is: one line."""
        return f"{self.repo_id} has no build/ folder at {commit if builds is None else commit[:12]}"

    def files(self, folder: str, commit: str) -> list[RemoteFile]:
        """Every file under ``folder`` at ``commit``, at any depth (for ``""``: the files at
        the top of the repository), each checked (:func:`.answers.remote_files`)."""
        return self.call(f"listing {folder}" if folder else "listing the repository",
                         lambda: answers.remote_files(self.tree(folder, commit, recursive=bool(folder)),
                                                      folder, self._at(commit)))

    def _at(self, commit: str) -> str:
        return f"{self.repo_id} at {commit[:12]}"

    # -- the HF cache -------------------------------------------------------------------
    def _cache_folder(self, repo_type: str) -> Path:
        """The repository's folder in the HF cache, ``HF_HUB_CACHE/<type>s--<org>--<name>``
        (huggingface_hub's ``repo_folder_name``, spelt out: importing it would load the
        whole HTTP stack, a tenth of a second that an offline run does not need)."""
        from huggingface_hub import constants

        parts = [f"{repo_type}s", *self.repo_id.split("/")]
        return Path(constants.HF_HUB_CACHE) / constants.REPO_ID_SEPARATOR.join(parts)

    def snapshot(self, commit: str) -> Path:
        """``snapshots/<commit>`` in the HF cache: the repository's files at that commit."""
        return self._cache_folder(self.repo_type) / "snapshots" / commit

    def cache(self) -> HubCacheRepo:
        from huggingface_hub import constants

        folder = self._cache_folder(self.repo_type)
        return HubCacheRepo(folder, Path(constants.HF_HUB_CACHE) / ".locks" / folder.name)

    def download(self, what: str, file: RemoteFile, commit: str, cache: HubCacheRepo,
                 arrival: Arrival | None = None, stop: threading.Event | None = None,
                 on_bytes: Callable[[int], None] | None = None) -> Path:
        """``file`` at ``commit`` in the HF cache, downloaded unless it is there already
        (one GET, checked against the listing: :meth:`.files.HubCacheRepo.fetch`)."""
        return self.call(what, partial(cache.fetch, file, commit, self._url(file, commit),
                                       session.headers(), arrival, stop, on_bytes))

    def _url(self, file: RemoteFile, commit: str) -> str:
        from huggingface_hub import hf_hub_url

        return str(hf_hub_url(self.repo_id, file.path, repo_type=self.repo_type, revision=commit))


class _NoBuildFolder(SourceError):
    """The Hub answered that ``build/`` does not exist at the commit (not an error of the
    listing: a release without builds)."""

    def __init__(self) -> None:
        super().__init__("no build/ folder")
