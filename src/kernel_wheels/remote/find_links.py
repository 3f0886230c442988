"""pip's ``--find-links``: a local folder (or ``file://`` URL) of wheels, or an HTML page
of links, read as one more place a project's files may be.

It answers like :class:`~.simple_client.SimpleClient` (``project_files``, ``fetch``,
``display``, ``show``, ``secrets``), so ``install`` reads indexes and find-links
locations the same way.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..errors import IndexServerError
from ..reading import open_regular
from ..redaction import one_line
from ..wheel.gpu_record import wheel_gpu_code
from .simple_client import IndexFile, SimpleClient, Sink
from .transport import DEFAULT_TIMEOUT, MAX_FILE, Tls


def _project_of(filename: str) -> str | None:
    try:
        return str(parse_wheel_filename(filename)[0])
    except InvalidWheelFilename:
        return None


class LocalLinks:
    """A folder's ``*.whl`` files."""

    def __init__(self, location: str) -> None:
        path = Path(url2pathname(urlsplit(location).path)) if location.startswith("file:") \
            else Path(location)
        self.folder = path.expanduser()
        self.display = one_line(str(self.folder))
        self.secrets: tuple[str, ...] = ()

    def show(self, text: str, limit: int = 300) -> str:
        return one_line(text, limit=limit)

    def project_url(self, project: str) -> str:
        return self.folder.as_uri() if self.folder.is_absolute() else str(self.folder)

    def project_files(self, project: str) -> list[IndexFile] | None:
        if not self.folder.is_dir():
            raise IndexServerError(f"--find-links {self.display}: no such folder")
        wanted = canonicalize_name(project)
        files = [IndexFile(path.name, path.resolve().as_uri(), None, None, None, False,
                           wheel_gpu_code(path))
                 for path in sorted(self.folder.glob("*.whl"))
                 if _project_of(path.name) == wanted and path.is_file()]
        return files or None

    def fetch(self, url: str, sink: Sink, limit: int = MAX_FILE) -> None:
        path = Path(url2pathname(urlsplit(url).path))
        if path.parent != self.folder.resolve():
            raise IndexServerError(f"{self.show(url)} is not in --find-links {self.display}")
        with open_regular(path, "--find-links file", IndexServerError, limit) as stream:
            while chunk := stream.read(1 << 20):
                sink(chunk)

    def close(self) -> None:
        pass


class PageLinks:
    """An HTML page of links (pip's --find-links URL): the links to the project's files."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT, tls: Tls | None = None) -> None:
        self._client = SimpleClient(url, timeout=timeout, tls=tls)
        self._page = url
        self.display = self._client.display
        self.secrets = self._client.secrets

    def show(self, text: str, limit: int = 300) -> str:
        return self._client.show(text, limit)

    def project_url(self, project: str) -> str:
        return self._page

    def project_files(self, project: str) -> list[IndexFile] | None:
        links = self._client.links(self._page)
        if links is None:
            raise IndexServerError(f"--find-links {self.display}: no page there")
        wanted = canonicalize_name(project)
        files = [f for f in links if _project_of(f.filename) == wanted]
        return files or None

    def fetch(self, url: str, sink: Sink, limit: int = MAX_FILE) -> None:
        self._client.fetch(url, sink, limit)

    def close(self) -> None:
        self._client.close()


def open_links(location: str, timeout: float = DEFAULT_TIMEOUT,
               tls: Tls | None = None) -> LocalLinks | PageLinks:
    if location.startswith(("http://", "https://")):
        return PageLinks(location, timeout, tls)
    return LocalLinks(location)
