"""Where kernels come from. Each source resolves a version request to a pinned
:class:`~kernel_wheels.kernel.revision.Revision`, lists the variant folders under ``build/``
and makes the selected ones available as local folders. The converter only sees
this protocol, so a new kind of source never touches it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import UsageError
from ..kernel.arrival import Arrival
from ..kernel.repo_id import is_repo_id
from ..kernel.revision import Revision
from ..kernel.versions import VersionRequest
from ..network import NetworkSettings


@dataclass(frozen=True)
class FetchedVariant:
    """A variant available as a local folder, some of its files perhaps still arriving."""

    path: Path
    #: Symbolic links inside the variant are followed only when they resolve inside this
    #: folder (the HF cache links snapshot files to its blobs); any other link is refused.
    link_root: Path
    #: Files still being downloaded (path relative to the variant folder -> its arrival):
    #: not in the folder yet, they will be at ``arrival.final``.
    arriving: Mapping[str, Arrival] = field(default_factory=dict)


class KernelSource(Protocol):
    """A Hub repository, a git repository or a folder (:func:`open_source`), as the
    converter sees it."""

    #: Default kernel name (the repository or folder name), used when a variant
    #: has no metadata.json.
    name: str
    #: How messages refer to the source.
    display: str
    #: Whether ``fetch`` downloads while the variants that arrived first are converted
    #: (the converter then leaves a core to the transfer until the last one is here).
    fetch_downloads: bool

    def resolve(self, request: VersionRequest | None) -> Revision:
        """Pin ``request`` to a commit; None means the default branch (or the folder)."""
        ...

    def variant_names(self, revision: Revision) -> list[str]:
        """Names of the folders directly under ``build/`` at ``revision``."""
        ...

    def fetch(self, revision: Revision, names: list[str],
              workdir: Path) -> Iterator[tuple[str, FetchedVariant]]:
        """Local folders holding the named variants (fetched into ``workdir`` if needed),
        each yielded as soon as it can be read, in any order: complete, or with its large
        files still arriving (``FetchedVariant.arriving``); the generator ends when every
        file is here."""
        ...

    def card(self, revision: Revision) -> str | None:
        """README.md or CARD.md of the kernel at ``revision``, if any."""
        ...


_URL = re.compile(r"^(https?|file|ssh|git)://|^[\w.-]+@[\w.-]+:")


def open_source(spec: str, *, repo_type: str | None = None, network: NetworkSettings | None = None,
                progress: Callable[[str], None] = lambda _: None) -> KernelSource:
    """A source from the command line's SOURCE: a local folder or git repository,
    a git URL, or a Hub repository id (``org/name``)."""
    network = network or NetworkSettings.from_environment()
    from .folder import FolderSource
    from .git import GitSource, is_git_repository

    path = Path(spec).expanduser()
    if path.exists():
        if is_git_repository(path):
            return GitSource(str(path.resolve()), local=True, network=network)
        return FolderSource(path)
    if _URL.match(spec):
        return GitSource(spec, local=False, network=network)
    if is_repo_id(spec):
        from .hub import HubSource

        return HubSource(spec, repo_type=repo_type, network=network, progress=progress)
    raise UsageError(
        f"'{spec}' is not an existing folder, a git URL or a Hub repository id (org/name)"
    )
