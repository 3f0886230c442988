"""Uploading wheels to an index server (pypiserver, devpi, Artifactory, Nexus, ...).

Why httpx2 (pydantic's continuation of httpx, already installed with huggingface_hub)
and the legacy upload API rather than twine's code: twine is a command, not a library.
Its ``Repository`` prints progress bars and decides "skip existing" from each server's
wording of an error, and its settings object pulls in its whole CLI. The upload
protocol itself is one multipart POST (``:action=file_upload``, the core metadata
fields, ``sha256_digest``, ``content``) that every index server implements the same
way, and the settings users have (``TWINE_*``, ``~/.pypirc``, keyring) are read in
``credentials.py``. What twine cannot do and we need is to compare with the index
*before* uploading: every file is checked and looked up on the index's Simple API
first, so a run either uploads only new files or refuses before changing anything.

The server is not trusted: the credentials go only to the upload URL's origin (the
Simple API gets them when it lives there too; a file it lists elsewhere is read
without them), every transfer keeps above a minimum rate (``transport``), and what
the server answers is redacted before it is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from packaging.metadata import Metadata
from packaging.utils import parse_wheel_filename

from ..errors import (
    CheckFailedError,
    IndexAuthenticationError,
    IndexConflictError,
    IndexServerError,
    UsageError,
)
from ..index.wheelfacts import Inspection, collect_wheels, inspect_wheel
from ..progress import Progress, Task, as_progress, readable_size
from ..wheel.variant_label import split_variant_label
from .credentials import Repository
from .simple_client import IndexFile, SimpleClient
from .transport import DEFAULT_TIMEOUT, IndexHttp, Pace, Tls

# Indexes whose Simple API lives elsewhere than next to the upload URL.
KNOWN_SIMPLE_APIS = {
    "https://upload.pypi.org/legacy/": "https://pypi.org/simple/",
    "https://test.pypi.org/legacy/": "https://test.pypi.org/simple/",
}


@dataclass(frozen=True)
class PublishOutcome:
    filename: str
    sha256: str
    status: str  # "uploaded", "already there" (same sha256 on the index), or "would upload"

    def to_dict(self) -> dict[str, str]:
        return {"wheel": self.filename, "sha256": self.sha256, "status": self.status}


def simple_api_candidates(upload_url: str) -> list[str]:
    """Where the Simple API of an upload URL may be: devpi serves ``/user/index/`` with
    ``/user/index/+simple/``, pypiserver ``/`` with ``/simple/``."""
    url = upload_url if upload_url.endswith("/") else upload_url + "/"
    if url in KNOWN_SIMPLE_APIS:
        return [KNOWN_SIMPLE_APIS[url]]
    parts = urlsplit(url)
    root = urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
    candidates = []
    if parts.path.strip("/"):
        candidates += [url + "+simple/", url + "simple/"]
    candidates.append(root + "simple/")
    return list(dict.fromkeys(candidates))


def find_simple_api(repository: Repository, timeout: float = DEFAULT_TIMEOUT,
                    tls: Tls | None = None) -> str:
    tried: list[str] = []
    for candidate in simple_api_candidates(repository.upload_url):
        with SimpleClient(candidate, repository.login, timeout, tls) as client:
            if client.answers():
                return candidate
            tried.append(client.display)
    if _server_answers(repository, timeout, tls):
        # The server is there, the index is not: on devpi, an index never created
        # (devpi answers 404 for it).
        raise IndexServerError(
            f"{repository.display}: the server answers, but there is no index at this URL "
            f"(tried {', '.join(tried)}); create it (devpi: devpi index -c USER/INDEX) or "
            "check the URL's path; a server whose Simple API is elsewhere: --index-url")
    raise IndexServerError(f"cannot find the Simple API of {repository.display} (tried "
                           f"{', '.join(tried)}): is the server up and the URL right? For a "
                           "server with its Simple API elsewhere, give it with --index-url")


def _server_answers(repository: Repository, timeout: float, tls: Tls | None) -> bool:
    """Whether anything answers HTTP at the upload URL's origin."""
    parts = urlsplit(repository.upload_url)
    root = urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
    with IndexHttp(None, Pace(timeout), tls=tls) as http:
        try:
            http.page(root)  # any page, a 404 or a redirect: an HTTP server is there
        except IndexAuthenticationError:
            return True  # it asks for credentials: there too
        except IndexServerError:  # refused, unreachable, or a server error
            return False
    return True


def upload_fields(inspection: Inspection) -> dict[str, Any]:
    """The legacy upload API's form fields for one wheel, from its METADATA."""
    assert inspection.facts is not None and inspection.metadata is not None
    meta = Metadata.from_email(inspection.metadata, validate=False)
    _, _, _, tags = parse_wheel_filename(inspection.facts.filename)
    fields: dict[str, Any] = {
        ":action": "file_upload",
        "protocol_version": "1",
        "name": meta.name,
        "version": str(meta.version),
        "filetype": "bdist_wheel",
        "pyversion": ".".join(sorted({t.interpreter for t in tags})),
        "metadata_version": meta.metadata_version,
        "sha256_digest": inspection.facts.sha256,
    }
    optional: dict[str, Any] = {
        "summary": meta.summary,
        "description": meta.description,
        "description_content_type": meta.description_content_type,
        "license_expression": meta.license_expression,
        "requires_python": str(meta.requires_python) if meta.requires_python else None,
        "requires_dist": [str(r) for r in meta.requires_dist or []],
        "project_urls": [f"{k}, {v}" for k, v in (meta.project_urls or {}).items()],
    }
    fields.update({key: value for key, value in optional.items() if value})
    return fields


def _existing(client: SimpleClient, projects: set[str]) -> dict[str, IndexFile]:
    found: dict[str, IndexFile] = {}
    for project in sorted(projects):
        for file in client.project_files(project) or []:
            found[file.filename] = file
    return found


class _Counted:
    """A file that advances a progress task as the upload reads it."""

    def __init__(self, stream: IO[bytes], task: Task) -> None:
        self._stream, self._task = stream, task

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._task.advance(len(data))
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()

    def fileno(self) -> int:
        return self._stream.fileno()


def _upload(http: IndexHttp, repository: Repository, inspection: Inspection,
            say: Progress) -> None:
    assert inspection.facts is not None
    name = inspection.facts.filename
    task = say.task(f"uploading {name}", inspection.facts.size, "B")
    try:
        with inspection.path.open("rb") as stream:
            answer = http.upload(repository.upload_url, data=upload_fields(inspection),
                                 files={"content": (name, _Counted(stream, task),
                                                    "application/octet-stream")})
    finally:
        task.finish()
    status = answer.status
    if status in (200, 201):
        return
    if status in (401, 403):
        hint = "" if repository.password else \
            " (no password given: set TWINE_PASSWORD, use ~/.pypirc or a keyring)"
        raise IndexAuthenticationError(f"{repository.display} refused the upload of {name} "
                                       f"(HTTP {status}): check the user name and password{hint}")
    if status == 409:
        raise IndexConflictError(f"{repository.display} already has a file named {name} "
                                 "(HTTP 409)")
    reason = answer.first_line or answer.reason
    if 300 <= status < 400:
        reason = f"redirected to {answer.location or '?'}: use that URL"
    raise IndexServerError(f"{repository.display} did not accept {name}: HTTP {status} {reason}")


def _plan(reader: SimpleClient, inspections: Sequence[Inspection]) -> list[tuple[Inspection, bool]]:
    """(wheel, whether to upload it); a different file under an existing name stops
    the run before anything is uploaded."""
    existing = _existing(reader, {i.facts.project for i in inspections if i.facts})
    plan: list[tuple[Inspection, bool]] = []
    for inspection in inspections:
        assert inspection.facts is not None
        there = existing.get(inspection.facts.filename)
        if there is None:
            plan.append((inspection, True))
            continue
        remote_sha = there.sha256 or reader.file_sha256(there.url)
        if remote_sha != inspection.facts.sha256:
            raise IndexConflictError(
                f"{reader.display} already has a different {inspection.facts.filename}; "
                "a published file never changes: give the new build another version "
                "(nothing was uploaded)")
        plan.append((inspection, False))
    return plan


def _refuse_variant_wheels(wheels: Sequence[Path]) -> None:
    """Index servers know no variant wheels (PEP 825 is a draft): their sixth name part
    is not a valid wheel name to them, so such a file is refused before anything is
    uploaded rather than half a release going up."""
    labelled = [path.name for path in wheels if split_variant_label(path.name)[1] is not None]
    if labelled:
        more = f" and {len(labelled) - 1} more" if len(labelled) > 1 else ""
        raise UsageError(
            f"{labelled[0]}{more}: a variant wheel (to-wheel --variants); index servers take "
            "only the plain wheels: give those (their versions have a '+': DIR/*+*.whl), "
            "and serve both with 'kernel-wheels index'; nothing was uploaded")


def publish(paths: Sequence[Path], repository: Repository, *, index_url: str | None = None,
            progress: Progress | None = None, timeout: float = DEFAULT_TIMEOUT,
            dry_run: bool = False, tls: Tls | None = None) -> list[PublishOutcome]:
    """Check every wheel, compare with what the index has, then upload the new ones
    (with ``dry_run``, say which would be uploaded and upload nothing).

    Raises before uploading anything when a wheel fails its checks or the index has a
    different file under the same name."""
    say = as_progress(progress)
    wheels = collect_wheels(paths)
    if not wheels:
        raise UsageError("no wheels to publish")
    _refuse_variant_wheels(wheels)
    # The index first: a server that is down or a wrong URL fails before minutes of checks.
    simple_url = index_url or find_simple_api(repository, timeout, tls)
    say(f"checking {len(wheels)} wheel(s)")
    checking = say.task("checking", len(wheels))
    inspections = []
    for path in wheels:
        inspections.append(inspect_wheel(path))
        checking.advance()
    checking.finish()
    for inspection in inspections:
        if inspection.refusal is not None:
            raise CheckFailedError(f"{inspection.path.name} refused: {inspection.refusal}; "
                                   "nothing was uploaded")
    # The login is bound to the upload URL's origin: an --index-url elsewhere gets none.
    with SimpleClient(simple_url, repository.login, timeout, tls) as reader:
        plan = _plan(reader, inspections)
    outcomes = []
    with IndexHttp(repository.login, Pace(timeout), tls=tls) as http:
        for inspection, upload in plan:
            assert inspection.facts is not None
            name = inspection.facts.filename
            if upload and dry_run:
                say(f"dry run: would upload {name} ({readable_size(inspection.facts.size)})")
                outcomes.append(PublishOutcome(name, inspection.facts.sha256, "would upload"))
            elif upload:
                say(f"uploading {name} ({readable_size(inspection.facts.size)})")
                _upload(http, repository, inspection, say)
                outcomes.append(PublishOutcome(name, inspection.facts.sha256, "uploaded"))
            else:
                say(f"{name}: already on the index with the same sha256, skipped")
                outcomes.append(PublishOutcome(name, inspection.facts.sha256, "already there"))
    return outcomes
