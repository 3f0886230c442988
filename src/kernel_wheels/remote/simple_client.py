"""Reading a package index's Simple API: the files of one project.

Asks for PEP 691 JSON and reads PEP 503 HTML when that is what comes back (pypiserver,
a static site behind a plain file server). ``file://`` index URLs read a local site's
``index.html`` files directly, as pip does. The index is hostile: every request goes
through :class:`~.transport.IndexHttp` (credentials only for the index's own origin, a
minimum rate, bounded answers), every text field of a page is redacted and made one
line before anything else sees it, and every failure is one typed, one-line error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit
from urllib.request import url2pathname

from packaging.utils import canonicalize_name

from ..errors import IndexServerError, UsageError
from ..index.simple import GPU_CODE_KEY, JSON_TYPE
from ..kernel.gpu_archs import GpuCode
from ..paging import at_most
from ..reading import open_regular, read_regular
from ..reading import parse_json as parse_json_text
from ..redaction import one_line, split_credentials, strip_userinfo, untrusted_line
from ..wheel.gpu_record import gpu_code_from
from .transport import DEFAULT_TIMEOUT, MAX_FILE, MAX_PAGE, IndexHttp, Login, Pace, Tls

#: The most files one project page may list (the page's bytes are bounded by the transport).
MAX_PAGE_FILES = 100_000
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
_SHA256_HEX = frozenset("0123456789abcdef")
Sink = Callable[[bytes], None]


@dataclass(frozen=True)
class IndexFile:
    """One file of a project as an index lists it. Every text in it is redacted and on
    one line (control characters escaped): what is shown of it is safe to show."""

    filename: str
    url: str  # absolute, no fragment, no user part
    sha256: str | None
    requires_python: str | None
    yanked: str | None  # None: not yanked; else the reason ("" when none given)
    has_metadata: bool
    #: The CUDA device code the index says the wheel holds (``kernel-wheels-gpu-code``
    #: in a JSON page, or the wheel's own record in a folder); None: not said.
    gpu_code: GpuCode | None = None


def check_index_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.hostname):
        raise UsageError(f"'{one_line(url)}' is not an index URL (like https://host/simple/)")
    return url if url.endswith("/") else url + "/"


def _sha256(value: object) -> str | None:
    """A listed sha256, lower-case; anything that is not 64 hex digits is kept as
    given (it then matches no file, which is what a wrong hash should do)."""
    if not isinstance(value, str) or not value:
        return None
    lowered = value.lower()
    return lowered if len(lowered) == 64 and set(lowered) <= _SHA256_HEX else one_line(value)


class _Clean:
    """Turns a page's raw strings into what an :class:`IndexFile` may hold."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = secrets

    def text(self, value: object) -> str | None:
        if value is None:
            return None
        return one_line(str(value), self.secrets, limit=1000)

    def note(self, value: object) -> str:
        """A text only shown (a yank reason): withheld when it may hold a secret."""
        return untrusted_line(str(value), self.secrets, limit=1000)

    def url(self, base: str, href: str) -> str:
        url = strip_userinfo(urljoin(base, href)).partition("#")[0]
        return one_line(url, self.secrets, limit=4000)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.links: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self._open, self._text = dict(attrs), []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.links.append((self._open, "".join(self._text).strip()))
            self._open = None


def _filename_of(url: str) -> str:
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def parse_html(page_url: str, text: str, secrets: tuple[str, ...] = ()) -> list[IndexFile]:
    parser = _Links()
    parser.feed(text)
    parser.close()
    base = urljoin(page_url, parser.base) if parser.base else page_url
    clean = _Clean(secrets)
    files = []
    for attrs, _label in at_most(parser.links, MAX_PAGE_FILES, "the page", ValueError):
        href = attrs.get("href")
        if not href:
            continue
        url = clean.url(base, href)
        algorithm, _, digest = urljoin(base, href).partition("#")[2].partition("=")
        metadata = attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata")
        files.append(IndexFile(
            filename=clean.text(_filename_of(url)) or "",
            url=url,
            sha256=_sha256(digest) if algorithm == "sha256" else None,
            requires_python=clean.text(attrs.get("data-requires-python")),
            yanked=clean.note(attrs.get("data-yanked") or "") if "data-yanked" in attrs else None,
            has_metadata=bool(metadata) and metadata != "false"))
    return files


def _json_files(text: str) -> list[dict[str, object]]:
    """The ``files`` of a PEP 691 page, each a dict with a string filename and url;
    ValueError for anything else."""
    page = parse_json_text(text)
    if not isinstance(page, dict):
        raise ValueError("the JSON is not an object")
    items = page.get("files", [])
    if not isinstance(items, list):
        raise ValueError("'files' is not a list")
    for item in at_most(items, MAX_PAGE_FILES, "the page", ValueError):
        if not (isinstance(item, dict) and isinstance(item.get("filename"), str)
                and isinstance(item.get("url"), str)):
            raise ValueError("a file entry has no 'filename' and 'url' strings")
    return items


def parse_json(page_url: str, text: str, secrets: tuple[str, ...] = ()) -> list[IndexFile]:
    clean = _Clean(secrets)
    files = []
    for item in _json_files(text):
        yanked = item.get("yanked", False)
        metadata = item.get("core-metadata", item.get("dist-info-metadata", False))
        hashes = item.get("hashes")
        requires = item.get("requires-python")
        files.append(IndexFile(
            filename=clean.text(item["filename"]) or "",
            url=clean.url(page_url, str(item["url"])),
            sha256=_sha256(hashes.get("sha256")) if isinstance(hashes, dict) else None,
            requires_python=clean.text(requires) if isinstance(requires, str) else None,
            yanked=None if yanked is False or yanked is None else
            ("" if yanked is True else clean.note(yanked)),
            has_metadata=bool(metadata),
            gpu_code=gpu_code_from(item.get(GPU_CODE_KEY))))
    return files


class SimpleClient:
    """The Simple API of one index. Its credentials (``login``, else the index URL's
    user part) are sent only to the index's own origin; files elsewhere are read
    without them."""

    def __init__(self, index_url: str, login: Login | None = None,
                 timeout: float = DEFAULT_TIMEOUT, tls: Tls | None = None) -> None:
        self.index_url = check_index_url(index_url)
        clean, user, password = split_credentials(self.index_url)
        self._base = clean
        self.timeout, self.tls = timeout, tls
        self._http = IndexHttp(login or Login.for_url(clean, user, password), Pace(timeout),
                               accept=ACCEPT, tls=tls)
        self.display = self._http.show(clean)

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._http.secrets

    def show(self, text: str, limit: int = 300) -> str:
        return self._http.show(text, limit)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SimpleClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def project_url(self, project: str) -> str:
        return f"{self._base}{canonicalize_name(project)}/"

    def answers(self) -> bool:
        """Whether the index URL itself answers 200 (is a Simple API root); for a
        ``file://`` index, whether its folder has an index.html."""
        if self._base.startswith("file:"):
            return (Path(url2pathname(urlsplit(self._base).path)) / "index.html").is_file()
        return self._http.page(self._base).found

    def project_files(self, project: str) -> list[IndexFile] | None:
        """The project's files; None when the index does not have the project."""
        url = self.project_url(project)
        if url.startswith("file:"):
            return self._local_files(url)
        page = self._http.page(url)
        if not page.found:  # 404, or pypiserver's redirect to its fallback index (PyPI)
            return None
        return self._parsed(url, page.text, json=page.content_type in (JSON_TYPE, "application/json"))

    def _parsed(self, url: str, text: str, json: bool = False) -> list[IndexFile]:
        """A page's files; a page that is no Simple API page (a link no URL parser takes,
        JSON of the wrong shape or nesting) is one line."""
        try:
            if json:
                return parse_json(url, text, self.secrets)
            return parse_html(url, text, self.secrets)
        except (ValueError, RecursionError) as exc:
            raise IndexServerError(f"{self.show(url)} is not a Simple API page: "
                                   f"{self.show(str(exc) or type(exc).__name__, 120)}") from None

    def links(self, url: str) -> list[IndexFile] | None:
        """Every link of an HTML page (pip's --find-links URL); None when it is not there."""
        page = self._http.page(url)
        return self._parsed(url, page.text) if page.found else None

    def fetch(self, url: str, sink: Sink, limit: int = MAX_FILE) -> None:
        """A listed file's bytes into ``sink``: over http(s) for a remote index (without
        credentials when the file is on another origin), from the disk for a
        ``file://`` index. Any other link is refused."""
        scheme = urlsplit(url).scheme.lower()
        if scheme == "file" and self._base.startswith("file:"):
            self._read_local(url, sink, limit)
        elif scheme in ("http", "https") and not self._base.startswith("file:"):
            self._http.download(url, sink, limit, theirs=True)  # a URL the index listed
        else:
            raise IndexServerError(f"{self.display} links to {self._http.untrusted(url)}, which is not "
                                   "on the same kind of index (http(s) or file); refusing it")

    def file_sha256(self, url: str) -> str:
        """Download a file and hash it, for indexes that list no hash."""
        digest = hashlib.sha256()
        self.fetch(url, digest.update)
        return digest.hexdigest()

    def _read_local(self, url: str, sink: Sink, limit: int) -> None:
        path = Path(url2pathname(urlsplit(url).path))
        size = 0
        try:
            with open_regular(path, "the index's file", IndexServerError, None) as stream:
                while chunk := stream.read(1 << 20):
                    size += len(chunk)
                    if size > limit:
                        raise IndexServerError(f"{path} is larger than the {limit} bytes "
                                               "accepted; refusing it")
                    sink(chunk)
        except OSError as exc:
            raise IndexServerError(f"cannot read {self.show(str(path))}: "
                                   f"{exc.strerror or type(exc).__name__}") from None

    def _local_files(self, url: str) -> list[IndexFile] | None:
        folder = Path(url2pathname(urlsplit(url).path))
        page = folder / "index.html"
        if not page.is_file():
            if not folder.parent.is_dir():
                raise IndexServerError(f"{self.display} is not a folder")
            return None
        try:
            text = read_regular(page, "the index page", IndexServerError, MAX_PAGE).decode(
                "utf-8", "replace")
        except OSError as exc:
            raise IndexServerError(f"cannot read {self.show(str(page))}: "
                                   f"{exc.strerror or type(exc).__name__}") from None
        return self._parsed(url, text)
