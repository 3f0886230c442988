"""Where a mirror's wheels go: the destination's ``files/`` (a static index, whose pages
the finish writes), or an index server through the standard upload API (``publish``'s
code: credentials as twine reads them, files already there skipped), which lists them
itself. Either way a wheel is uploaded before its record is written, so the state never
names a wheel that is not there.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .finish import object_keys
from .store import Destination

if TYPE_CHECKING:  # the upload client (httpx, TLS) is loaded by a run that uploads, only
    from ..remote.credentials import Repository
    from ..remote.transport import Tls


class WheelUploads(Protocol):
    description: str
    #: Whether the mirror writes the pages that list the wheels (a static index), or
    #: the server does (and then yanks and removals cannot be made through it).
    writes_pages: bool

    def upload(self, path: Path, metadata: bytes) -> bool | None:
        """Make the wheel (and its PEP 658 metadata) available, completely. False: it
        was there already (the same file), nothing was sent; True or None: sent."""
        ...


class StoreUploads:
    """``files/<wheel>`` then ``files/<wheel>.metadata`` in the destination."""

    writes_pages = True

    def __init__(self, store: Destination) -> None:
        self.store, self.description = store, store.description

    def upload(self, path: Path, metadata: bytes) -> bool:
        wheel_key, metadata_key = object_keys(path.name)
        self.store.put_file(wheel_key, path)
        self.store.put(metadata_key, metadata)
        return True


class ServerUploads:
    """An index server (pypiserver, devpi, Artifactory, Nexus...): each wheel through
    :func:`~kernel_wheels.remote.publish.publish`, which checks it, skips it when the
    server has the same file (a run killed after an upload converts it again, to the same
    bytes) and refuses a different file under the same name."""

    writes_pages = False

    def __init__(self, repository: Repository, *, index_url: str | None = None,
                 timeout: float | None = None, tls: Tls | None = None) -> None:
        from ..remote.transport import DEFAULT_TIMEOUT

        self.repository, self.index_url, self.tls = repository, index_url, tls
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self.description = repository.display

    def upload(self, path: Path, metadata: bytes) -> bool:
        from ..remote.publish import find_simple_api, publish

        if self.index_url is None:  # looked for once, at the first wheel
            self.index_url = find_simple_api(self.repository, self.timeout, self.tls)
        outcomes = publish([path], self.repository, index_url=self.index_url, timeout=self.timeout,
                           tls=self.tls)
        return any(outcome.status == "uploaded" for outcome in outcomes)
