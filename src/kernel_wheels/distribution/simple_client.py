"""Reading a package index's Simple API: the files of one project.

Asks for PEP 691 JSON and reads PEP 503 HTML when that is what comes back (pypiserver,
a static site behind a plain file server). ``file://`` index URLs read a local site's
``index.html`` files directly, as pip does. Every failure is one typed, one-line error;
URLs in messages never carry credentials.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit
from urllib.request import url2pathname

import httpx2
from packaging.utils import canonicalize_name

from ..errors import IndexAuthenticationError, IndexServerError, UsageError
from .simple import JSON_TYPE

ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


@dataclass(frozen=True)
class IndexFile:
    """One file of a project as an index lists it."""

    filename: str
    url: str  # absolute, no fragment
    sha256: str | None
    requires_python: str | None
    yanked: str | None  # None: not yanked; else the reason ("" when none given)
    has_metadata: bool


def redact(url: str) -> str:
    """``url`` without user name and password."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``http://user:pw@host/x`` -> (``http://host/x``, user, pw)."""
    parts = urlsplit(url)
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return redact(url), user, password


def check_index_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.hostname):
        raise UsageError(f"'{redact(url)}' is not an index URL (like https://host/simple/)")
    return url if url.endswith("/") else url + "/"


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


def parse_html(page_url: str, text: str) -> list[IndexFile]:
    parser = _Links()
    parser.feed(text)
    base = urljoin(page_url, parser.base) if parser.base else page_url
    files = []
    for attrs, _label in parser.links:
        href = attrs.get("href")
        if not href:
            continue
        url, _, fragment = urljoin(base, href).partition("#")
        algorithm, _, digest = fragment.partition("=")
        metadata = attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata")
        files.append(IndexFile(
            filename=_filename_of(url),
            url=url,
            sha256=digest if algorithm == "sha256" and digest else None,
            requires_python=attrs.get("data-requires-python"),
            yanked=(attrs.get("data-yanked") or "") if "data-yanked" in attrs else None,
            has_metadata=bool(metadata) and metadata != "false"))
    return files


def parse_json(page_url: str, text: str) -> list[IndexFile]:
    page = json.loads(text)
    files = []
    for item in page.get("files", []):
        yanked = item.get("yanked", False)
        metadata = item.get("core-metadata", item.get("dist-info-metadata", False))
        files.append(IndexFile(
            filename=item["filename"],
            url=urljoin(page_url, item["url"]).partition("#")[0],
            sha256=(item.get("hashes") or {}).get("sha256"),
            requires_python=item.get("requires-python"),
            yanked=None if yanked is False else ("" if yanked is True else str(yanked)),
            has_metadata=bool(metadata)))
    return files


class SimpleClient:
    """The Simple API of one index. ``auth`` is sent only to the index's own host."""

    def __init__(self, index_url: str, auth: tuple[str, str] | None = None,
                 timeout: float = 60) -> None:
        self.index_url = check_index_url(index_url)
        self.display = redact(self.index_url)
        clean, user, password = split_credentials(self.index_url)
        if auth is None and user is not None:
            auth = (user, password or "")
        self._base = clean
        self._client = httpx2.Client(auth=auth, timeout=timeout, follow_redirects=False,
                                    headers={"Accept": ACCEPT})

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> SimpleClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def project_url(self, project: str) -> str:
        return f"{self._base}{canonicalize_name(project)}/"

    def project_files(self, project: str) -> list[IndexFile] | None:
        """The project's files; None when the index does not have the project."""
        url = self.project_url(project)
        if url.startswith("file:"):
            return self._local_files(url)
        response = self.get(url)
        if response.status_code == 404 or response.is_redirect:
            # pypiserver redirects unknown projects to its fallback index (PyPI)
            return None
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        text = response.text
        try:
            if content_type == JSON_TYPE or content_type == "application/json":
                return parse_json(url, text)
            return parse_html(url, text)
        except (ValueError, KeyError, TypeError) as exc:
            raise IndexServerError(f"{redact(url)} is not a Simple API page: {exc}") from None

    def get(self, url: str) -> httpx2.Response:
        """GET with every failure turned into one line; 401/403 are authentication
        errors, other statuses above 399 (except 404) server errors."""
        try:
            response = self._client.get(url)
        except httpx2.HTTPError as exc:
            raise IndexServerError(f"cannot reach {redact(url)}: {describe_http_error(exc)}") \
                from None
        if response.status_code in (401, 403):
            raise IndexAuthenticationError(
                f"{redact(url)} refused access (HTTP {response.status_code}): check the user "
                "name and password")
        if response.status_code >= 400 and response.status_code != 404:
            raise IndexServerError(f"{redact(url)} answered HTTP {response.status_code} "
                                   f"{response.reason_phrase}")
        return response

    def file_sha256(self, url: str) -> str:
        """Download a file and hash it, for indexes that list no hash."""
        digest = hashlib.sha256()
        try:
            with self._client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise IndexServerError(f"{redact(url)} answered HTTP {response.status_code}")
                for chunk in response.iter_bytes():
                    digest.update(chunk)
        except httpx2.HTTPError as exc:
            raise IndexServerError(f"cannot reach {redact(url)}: {describe_http_error(exc)}") \
                from None
        return digest.hexdigest()

    def _local_files(self, url: str) -> list[IndexFile] | None:
        folder = Path(url2pathname(urlsplit(url).path))
        page = folder / "index.html"
        if not page.is_file():
            if not folder.parent.is_dir():
                raise IndexServerError(f"{self.display} is not a folder")
            return None
        return parse_html(url, page.read_text(encoding="utf-8"))


def describe_http_error(exc: httpx2.HTTPError) -> str:
    """A short reason for a transport error, without URLs (which could carry secrets)."""
    if isinstance(exc, httpx2.ConnectError):
        reason = str(exc).lower()
        if "refused" in reason:
            return "connection refused (is the server running?)"
        if "name or service not known" in reason or "nodename" in reason or "resolve" in reason:
            return "unknown host"
        return "cannot connect"
    if isinstance(exc, httpx2.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx2.UnsupportedProtocol | httpx2.InvalidURL):
        return "not an http(s) URL"
    return type(exc).__name__
