"""A kernel repository on the Hugging Face Hub (or a Hub-compatible server), through
``huggingface_hub``. HF_ENDPOINT, HF_TOKEN, HF_HOME and HF_HUB_OFFLINE are honoured
because every call goes through huggingface_hub's own configuration.

Only the selected variants are downloaded, file by file at the pinned commit, into the
ordinary HF cache (:mod:`.hub_files`), so a second run downloads nothing and
HF_HUB_OFFLINE=1 converts from the cache.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from packaging.utils import canonicalize_name

from ..cache import read_commit_time, write_commit_time
from ..confine import commit_id, shown
from ..errors import (
    AuthenticationError,
    LockError,
    NetworkError,
    RepoNotFoundError,
    RevisionNotFoundError,
    SourceError,
    UnexpectedAnswerError,
    UsageError,
)
from ..kernel.arrival import Arrival
from ..kernel.repo_id import hub_url
from ..kernel.revision import Revision
from ..kernel.versions import (
    VersionRequest,
    describe_versions,
    ref_for_request,
    releases_around,
    tag_version,
)
from ..network import (
    MAX_RETRY_AFTER,
    NetworkSettings,
    TransferTooSlow,
    configure_hub_client,
    origin,
    retry_after_seconds,
)
from ..progress import SILENT_TASK, Task, as_progress, counted
from ..redaction import one_line, strip_userinfo
from . import FetchedVariant, hub_answers
from .hub_files import HubCacheRepo, RemoteFile, TransferMismatch, variant_lock_hash

T = TypeVar("T")
REPO_TYPES = ("kernel", "model")
_NETWORK_ERRORS = {"ConnectError", "ConnectTimeout", "ReadTimeout", "TimeoutException",
                   "NetworkError", "TransportError", "ConnectionError", "RemoteProtocolError"}


def _is_network_error(exc: BaseException) -> bool:
    return any(cls.__name__ in _NETWORK_ERRORS for cls in type(exc).__mro__)


# A variant's listing and the files the converter reads before writing (metadata.json,
# Python sources) are fetched a few variants at a time; the rest (the binaries) two at a
# time, in the order the variants were handed on, and read by the converter as they land
# (``kernel.arrival``). Measured cold, 4 x 48 MB through olah, when each variant was converted
# only once complete (medians of 6): large files 1 or 2 at a time 5.04 s, 3 at a time
# 5.40 s, 4 at a time 6.06 s; two, not one, so that a real Hub's CDN gets parallel streams.
# Read as they land, the same run takes as long as a plain download of its files (4.31
# vs 4.30 s, medians of 5): only the last block is compressed after the last byte.
_STREAMS = 2
_VARIANTS_AT_ONCE = 3
_READ_FIRST = (".json", ".py", ".md", ".txt", ".sigstore")
_CARDS = ("README.md", "CARD.md")
#: Pages of one tree listing (the Hub gives 1,000 entries a page).
_MAX_PAGES = 1000
#: A card larger than this is not a kernel's README: left out of the wheel's description.
_MAX_CARD = 1 << 20


@dataclass(frozen=True)
class _Transfer:
    """A file of a variant handed on before it is here."""

    variant: str
    file: RemoteFile
    arrival: Arrival
    done: Callable[[], None]  # says "downloaded build/<variant>" after the last file
    task: Task = SILENT_TASK  # the variant's download bar


def _headers() -> dict[str, str]:
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    return dict(build_hf_headers())


def _check_space(folder: Path, needed: int, what: str) -> None:
    """A download that cannot fit fails before it starts, not at the disk's last byte."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise SourceError(f"{what}: needs {needed / 1e6:.0f} MB in the HF cache ({folder.parent}), "
                          f"only {free / 1e6:.0f} MB free there (HF_HOME, HF_HUB_CACHE)")


def _reason(exc: BaseException) -> str:
    """A short, token-free description of a failed transfer."""
    name = type(exc).__name__
    if isinstance(exc, TransferTooSlow):
        return str(exc)[:160]
    if "Timeout" in name or isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).splitlines()[0] if str(exc) else name
    return text[:160]


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def hub_pages(endpoint: str, url: str, params: dict[str, Any] | None, where: str,
              what: str) -> Iterator[Any]:
    """The pages of a Hub listing, as JSON. Read here rather than through
    huggingface_hub's ``paginate``, which follows a page's ``Link: next`` to any URL,
    forever: the next page must be on ``endpoint``'s own origin, and there are at most
    ``MAX_PAGES`` of them."""
    from huggingface_hub import get_session, hf_raise_for_status

    next_url: str | None = url
    for _page in range(_MAX_PAGES):
        assert next_url is not None
        response = get_session().get(next_url, params=params, headers=_headers())
        hf_raise_for_status(response)
        try:
            page = response.json()
        except RecursionError:  # JSON nested deeper than Python's parser recurses
            raise UnexpectedAnswerError(f"{where}: a page of the listing of {what} is nested too "
                                        "deeply to be a Hub answer") from None
        yield page
        next_url, params = response.links.get("next", {}).get("url"), None
        if next_url is None:
            return
        if origin(next_url) != origin(endpoint):
            raise UnexpectedAnswerError(f"{where}: the listing's next page is on another host "
                                        f"({shown(next_url, 80)}); refusing to follow it")
    raise UnexpectedAnswerError(f"{where}: the listing of {what} goes on "
                                f"for more than {_MAX_PAGES} pages")


def _located(fn: Callable[[], T]) -> T:
    """``fn()``. huggingface_hub reports a file it could not locate (HTTP 403, 404, 5xx, a
    timeout, a reset) as LocalEntryNotFoundError; its cause is raised instead, so that it
    is judged like the same answer to any other call."""
    from huggingface_hub import errors

    try:
        return fn()
    except errors.LocalEntryNotFoundError as exc:
        cause = exc.__cause__
        if isinstance(cause, (errors.HfHubHTTPError, errors.EntryNotFoundError)) \
                or cause is not None and _is_network_error(cause):
            raise cause from None
        raise


def _check_endpoint(endpoint: str) -> None:
    """HF_ENDPOINT must be a URL: without a scheme every request fails in a way that
    looks like a network fault (and would be retried as one)."""
    scheme = endpoint.partition("://")[0].lower() if "://" in endpoint else ""
    if scheme not in ("http", "https"):
        shown_endpoint = one_line(strip_userinfo(endpoint), limit=200)
        raise UsageError(f"HF_ENDPOINT '{shown_endpoint}' is not an http(s) URL: write it with its "
                         f"scheme, e.g. http://{shown_endpoint.split('://')[-1]} or https://...")


class HubSource:
    def __init__(self, repo_id: str, *, repo_type: str | None = None,
                 network: NetworkSettings | None = None,
                 progress: Callable[[str], None] = lambda _: None,
                 locked_variants: Mapping[str, str] | None = None) -> None:
        """``locked_variants``: {variant: ``kernels.lock``'s hash}; when given, a variant is
        fetched only if the listing it is downloaded from hashes to what was locked."""
        from huggingface_hub import constants

        self.locked_variants = locked_variants
        self.network = network or NetworkSettings.from_environment()
        self.progress = as_progress(progress)
        self.repo_id = repo_id
        self.name = repo_id.split("/")[-1]
        #: The distribution name of its wheels: the repository's (as the removed `kernels
        #: to-wheel` named them, and as `serve` lists them before any metadata.json is
        #: read), whatever metadata.json calls the kernel; the import name is the kernel's.
        self.distribution: str | None = canonicalize_name(self.name)
        self.endpoint = constants.ENDPOINT
        _check_endpoint(self.endpoint)
        #: How messages name the endpoint: HF_ENDPOINT may carry a user and password.
        self.shown_endpoint = strip_userinfo(self.endpoint)
        self.display = repo_id
        self.offline = bool(constants.HF_HUB_OFFLINE)
        self.fetch_downloads = not self.offline
        if not self.offline:  # offline, no request is made (and its HTTP stack is not loaded)
            configure_hub_client(self.network)
        self._api: Any = None
        self.repo_types = (repo_type,) if repo_type else REPO_TYPES
        self.repo_type: str = self.repo_types[0]

    @property
    def api(self) -> Any:
        """The Hub API client, made on first use: a conversion from the HF cache
        (HF_HUB_OFFLINE=1) never needs it, and importing it costs a tenth of a second."""
        if self._api is None:
            from huggingface_hub import HfApi

            self._api = HfApi()
        return self._api

    def publisher_trust(self) -> tuple[str, bool | None]:
        """The repository's owner and the Hub's ``trustedKernelPublisher`` flag for it,
        asked as the kernels library asks (the organisation overview, HF_ENDPOINT, the
        token if one is set), once and without retries: True or False as the Hub says
        (a namespace that is no organisation, HTTP 404: False); None when it cannot be
        known (offline, an error, an answer that is not the Hub's)."""
        publisher = self.repo_id.split("/", 1)[0]
        if self.offline:
            return publisher, None
        from huggingface_hub import errors

        try:
            info = self.api.get_organization_overview(publisher)
        except errors.HfHubHTTPError as exc:
            return publisher, (False if _status(exc) == 404 else None)
        except Exception:  # a network error, an answer of another shape: not known
            return publisher, None
        flag = getattr(info, "trustedKernelPublisher", False)
        return publisher, flag is True

    # -- error handling -----------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T],
              missing: Callable[[], SourceError] | None = None) -> T:
        """Run a Hub call, retrying network failures, timeouts, 429 and 5xx answers with
        backoff, mapping errors to one clear line. ``missing`` makes the error for "not
        found" answers: Hub-compatible servers give a missing repository, revision or
        file as 401, 404 or "entry not found"."""
        from huggingface_hub import errors

        tries = self.network.retries + 1
        for attempt in range(1, tries + 1):
            retry_after = None
            try:
                return _located(fn)
            except errors.LocalEntryNotFoundError as exc:  # before EntryNotFoundError, its base
                if self.offline:
                    raise SourceError(
                        f"HF_HUB_OFFLINE=1 and {self.repo_id} is not in the cache for this "
                        "request (convert it once online first)") from None
                failure = _reason(exc.__cause__ or exc)
            except errors.GatedRepoError:
                raise AuthenticationError(
                    f"{self.repo_id} is gated: accept its terms on the Hub, then set HF_TOKEN "
                    "to a token of that account") from None
            except (errors.RevisionNotFoundError, errors.RepositoryNotFoundError,
                    errors.EntryNotFoundError) as exc:
                if missing is not None:
                    raise missing() from None
                if isinstance(exc, errors.RevisionNotFoundError):
                    raise RevisionNotFoundError(f"{what}: revision not found in {self.repo_id}") from None
                if isinstance(exc, errors.RepositoryNotFoundError):
                    raise RepoNotFoundError(self._not_found()) from None
                raise SourceError(f"{what}: not found in {self.repo_id}") from None
            except errors.OfflineModeIsEnabled:
                raise SourceError(
                    f"{what}: HF_HUB_OFFLINE=1 and {self.repo_id} is not in the cache "
                    "for this request") from None
            except errors.HfHubHTTPError as exc:
                status = _status(exc)
                if status in (401, 403):
                    raise AuthenticationError(self._auth_message(status)) from None
                if status == 429:
                    retry_after = retry_after_seconds(getattr(exc.response, "headers", None))
                    if retry_after is not None and retry_after > MAX_RETRY_AFTER:
                        raise NetworkError(f"{what}: {self.shown_endpoint} is rate limiting (HTTP 429) "
                                           f"and asks to wait {retry_after:.0f} s; try again "
                                           "later") from None
                elif status is not None and status < 500:
                    raise SourceError(f"{what} failed: HTTP {status} from {self.shown_endpoint}") from None
                failure = f"HTTP {status}"
            except TransferMismatch as exc:  # a bad transfer: the next one may be good
                failure = str(exc)
            except (OSError, ValueError) as exc:
                # A download cut short or a file that arrived shorter than announced
                # ("consistency check failed") lands here; so do network errors.
                if not (_is_network_error(exc) or "consistency check" in str(exc).lower()
                        or isinstance(exc, (ConnectionError, TimeoutError))):
                    if isinstance(exc, ValueError):  # HTML or broken JSON where JSON was asked for
                        raise self._unexpected(what, exc) from None
                    raise
                failure = _reason(exc)
            except (TypeError, KeyError, AttributeError, RecursionError) as exc:
                # huggingface_hub read an answer of the wrong shape (or JSON nested deeper
                # than its parser recurses) (a field missing, a
                # list where an object belongs): a server that is not a Hub, or a hostile one.
                raise self._unexpected(what, exc) from None
            except Exception as exc:
                if not _is_network_error(exc):
                    raise
                failure = _reason(exc)
            if attempt == tries:
                raise NetworkError(f"{what}: no usable answer from {self.shown_endpoint} after "
                                   f"{counted(tries, 'try', 'tries')} ({failure}); the timeout is "
                                   f"{self.network.timeout:g} s (--timeout, KERNEL_WHEELS_TIMEOUT)") from None
            delay = self.network.delay(attempt, retry_after)
            self.progress(f"warning: {what}: {failure}; trying again in {delay:g} s "
                          f"({attempt}/{tries - 1})")
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _unexpected(self, what: str, exc: BaseException) -> UnexpectedAnswerError:
        detail = one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, limit=80)
        return UnexpectedAnswerError(
            f"{what}: {self.shown_endpoint} answered for {self.repo_id} with something that is not a "
            f"Hub answer ({type(exc).__name__}: {detail}); is HF_ENDPOINT a Hub or a Hub mirror?")

    def _token_set(self) -> bool:
        from huggingface_hub import get_token

        return get_token() is not None

    def _not_found(self) -> str:
        types = " or ".join(self.repo_types)
        hint = ("; if it is private, check that HF_TOKEN grants access to it" if self._token_set()
                else "; if it is private or gated, set HF_TOKEN")
        return f"repository {self.repo_id} not found on {self.shown_endpoint} (as {types} repo){hint}"

    def _auth_message(self, status: int) -> str:
        if self._token_set():
            return (f"{self.shown_endpoint} refused access to {self.repo_id} (HTTP {status}): the token "
                    "in HF_TOKEN (not shown) lacks access")
        return (f"{self.repo_id} needs authentication (HTTP {status}): set HF_TOKEN to a token "
                "with read access")

    # -- resolution ---------------------------------------------------------------
    def _refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """({tag: commit}, {branch: commit}); picks the repo type that exists."""
        from huggingface_hub import errors

        last: SourceError | None = None
        for repo_type in self.repo_types:
            try:
                refs: Any = self._call("listing refs", partial(
                    self.api.list_repo_refs, self.repo_id, repo_type=repo_type),
                    missing=lambda: RepoNotFoundError(self._not_found()))
            except RepoNotFoundError as exc:
                last = exc
                continue
            except errors.HfHubHTTPError:
                raise
            self.repo_type = repo_type
            return hub_answers.refs(refs, self.repo_id)
        assert last is not None
        raise last

    def _repo_cache(self, repo_type: str) -> Path:
        """The repository's folder in the HF cache, ``HF_HUB_CACHE/<type>s--<org>--<name>``
        (huggingface_hub's ``repo_folder_name``, spelt out: importing it would load the
        whole HTTP stack, a tenth of a second that an offline run does not need)."""
        from huggingface_hub import constants

        parts = [f"{repo_type}s", *self.repo_id.split("/")]
        return Path(constants.HF_HUB_CACHE) / constants.REPO_ID_SEPARATOR.join(parts)

    def _cached_refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """Offline: the refs the HF cache remembers (HF_HOME/hub/<repo>/refs/<name>)."""
        from huggingface_hub import constants

        for repo_type in self.repo_types:
            refs_dir = self._repo_cache(repo_type) / "refs"
            if refs_dir.is_dir():
                self.repo_type = repo_type
                refs = {name: commit_id(p.read_text().strip(), f"{self.repo_id}: ref {name} "
                                                                  "in the HF cache")
                        for p in refs_dir.rglob("*") if p.is_file()
                        and not (name := p.relative_to(refs_dir).as_posix()).startswith(".")}
                tags = {k: v for k, v in refs.items() if re.fullmatch(r"v\d+(\.\d+)+", k)}
                return tags, {k: v for k, v in refs.items() if k not in tags}
        raise SourceError(f"HF_HUB_OFFLINE=1 and {self.repo_id} is not in the cache "
                          f"({constants.HF_HUB_CACHE}); convert it once online first")

    def release_tags(self) -> dict[str, str]:
        """{release tag (``vX.Y.Z``): commit} of the repository (``serve`` lists these);
        offline, the ones the HF cache remembers."""
        tags, _branches = self._cached_refs() if self.offline else self._refs()
        return {tag: commit for tag, commit in tags.items() if tag_version(tag) is not None}

    def resolve(self, request: VersionRequest | None) -> Revision:
        if not self.offline:
            return self._resolve(request, *self._refs())
        try:
            return self._resolve(request, *self._cached_refs())
        except RevisionNotFoundError as exc:
            raise RevisionNotFoundError(f"HF_HUB_OFFLINE=1: {exc.message} (offline, only the versions "
                                        "in the HF cache are known)") from None

    def _resolve(self, request: VersionRequest | None, tags: dict[str, str],
                 branches: dict[str, str]) -> Revision:
        ref = ref_for_request(request, tags, list(branches), default="main", where=self.repo_id)
        commit = tags.get(ref) or branches.get(ref)
        if commit is None:
            commit = self._commit_of(ref, [*tags, *branches])
        commit_time = self._commit_time(commit)
        release, earlier = releases_around(commit, commit_time, tags, self._tag_commit_time,
                                           self.repo_id)
        return Revision(request.text if request else ref, ref, commit, commit_time,
                        hub_url(self.repo_id, self.repo_type), release, earlier)

    def _tag_commit_time(self, commit: str) -> int | None:
        when = self._commit_time(commit)
        if when is None and self.offline:
            # Online, these times are fetched and remembered; offline, a missing one would
            # silently change the snapshot's version, and so its bytes.
            raise SourceError(f"HF_HUB_OFFLINE=1: the release history of {self.repo_id} is not "
                              "in the cache (convert this revision once online first)")
        return when

    def _commit_of(self, ref: str, known: list[str]) -> str:
        if self.offline:
            if re.fullmatch(r"[0-9a-f]{40}", ref):
                return ref
            raise SourceError(f"HF_HUB_OFFLINE=1: revision '{ref}' of {self.repo_id} is not in "
                              "the cache")
        if not re.fullmatch(r"[0-9a-f]{7,40}", ref):
            raise RevisionNotFoundError(f"revision '{ref}' not found in {self.repo_id}; versions "
                                        f"that exist: {describe_versions(known)}")
        info: Any = self._call("resolving the revision", lambda: self.api.repo_info(
            self.repo_id, revision=ref, repo_type=self.repo_type),
            missing=lambda: RevisionNotFoundError(
                f"revision '{ref}' not found in {self.repo_id}; versions that exist: "
                f"{describe_versions(known)}"))
        return hub_answers.revision_commit(info, f"{self.repo_id} at {ref}")

    def _commit_time(self, commit: str) -> int | None:
        """The commit's time (zip timestamps, branch versions); remembered per commit so
        that an offline conversion gives the same bytes as the online one."""
        if (known := read_commit_time(commit)) is not None:
            return known
        if self.offline:
            return None
        try:
            info: Any = self._call("reading the commit", lambda: self.api.repo_info(
                self.repo_id, revision=commit, repo_type=self.repo_type))
        except SourceError:
            return None
        modified = getattr(info, "last_modified", None)
        if modified is None:
            return None
        write_commit_time(commit, int(modified.timestamp()))
        return int(modified.timestamp())

    # -- files --------------------------------------------------------------------
    def variant_names(self, revision: Revision) -> list[str]:
        assert revision.commit is not None
        if self.offline:
            snapshot = self._snapshot_dir(revision.commit)
            names = sorted(p.name for p in (snapshot / "build").iterdir() if p.is_dir()) \
                if (snapshot / "build").is_dir() else []
        else:
            commit = revision.commit
            names = self._call("listing build/", lambda: hub_answers.folder_names(
                self._tree("build", commit), "build", f"{self.repo_id} at {commit[:12]}"),
                missing=lambda: SourceError(f"{self.repo_id} has no build/ folder at {commit}"))
        if not names:
            raise SourceError(f"{self.repo_id} has no build/ folder at {revision.commit[:12]}")
        return names

    def _tree(self, folder: str, commit: str, recursive: bool = False) -> Iterator[list[dict[str, Any]]]:
        """The pages of the tree listing of ``folder`` at ``commit`` (the Hub's
        ``/api/<type>s/<repo>/tree/<commit>/<folder>``), as JSON (see :func:`hub_pages`)."""
        where = f"{self.repo_id} at {commit[:12]}"
        path = f"/{quote(folder, safe='')}" if folder else ""
        url = f"{self.endpoint}/api/{self.repo_type}s/{self.repo_id}/tree/{quote(commit, safe='')}{path}"
        for page in hub_pages(self.endpoint, url, {"recursive": recursive, "expand": False},
                              where, folder or "the repository"):
            yield hub_answers.tree_page(page, where)

    def _snapshot_dir(self, commit: str) -> Path:
        return self._repo_cache(self.repo_type) / "snapshots" / commit

    def _cache(self) -> HubCacheRepo:
        from huggingface_hub import constants

        folder = self._repo_cache(self.repo_type)
        return HubCacheRepo(folder, Path(constants.HF_HUB_CACHE) / ".locks" / folder.name)

    def fetch(self, revision: Revision, names: list[str],
              workdir: Path) -> Iterator[tuple[str, FetchedVariant]]:
        """Each variant's files, listed at the pinned commit and downloaded into the HF
        cache (:mod:`.hub_files`). A variant is handed on as soon as the files read before
        writing are here, its binaries still arriving (:mod:`kernel_wheels.kernel.arrival`: the converter
        reads them as they land); the generator ends when every download is over, raising
        the first that failed."""
        commit = revision.commit
        assert commit is not None
        if self.offline:  # what snapshot_download would answer offline, without its imports
            snapshot = self._snapshot_dir(commit)
            for name in names:
                yield name, FetchedVariant(snapshot / "build" / name, snapshot.parent.parent)
            return
        cache = self._cache()
        # The HF cache records the ref, so that an offline run (HF_HUB_OFFLINE=1) resolves
        # it; every byte is fetched by commit, so a ref that moves meanwhile changes nothing.
        if revision.ref and revision.ref != commit:
            cache.remember_ref(revision.ref, commit)
        transfers: list[Future[None]] = []
        stop = threading.Event()  # set when the run ends early: downloads stop mid-file
        with ThreadPoolExecutor(max_workers=_VARIANTS_AT_ONCE) as pool, \
                ThreadPoolExecutor(max_workers=_STREAMS) as streams:
            futures = {pool.submit(self._fetch_first, name, commit, cache): name for name in names}
            try:
                for future in as_completed(futures):
                    fetched, pending = future.result()
                    # Queued in the order the variants are handed on, which is the order
                    # the converter's workers take them in: each reads what is arriving.
                    transfers += [streams.submit(self._fetch_arriving, commit, cache, transfer, stop)
                                  for transfer in pending]
                    yield futures[future], fetched
                for transfer in as_completed(transfers):
                    transfer.result()
            finally:
                stop.set()  # over, or abandoned (Ctrl-C, an error): nothing more to fetch
                for variant_future in futures:
                    variant_future.cancel()
                for transfer in transfers:
                    transfer.cancel()

    def _fetch_first(self, name: str, commit: str,
                     cache: HubCacheRepo) -> tuple[FetchedVariant, list[_Transfer]]:
        """List the variant and download the files read before writing; the others are
        returned, each with the :class:`Arrival` a reader follows, for
        :meth:`_fetch_arriving`."""
        what = f"downloading build/{name}"
        listed = self._call(f"listing build/{name}", lambda: hub_answers.remote_files(
            self._tree(f"build/{name}", commit, recursive=True), f"build/{name}",
            f"{self.repo_id} at {commit[:12]}"))
        self.check_lock(name, commit, listed)
        files = sorted(listed, key=lambda f: (f.size, f.path))
        missing = [f for f in files if not cache.pointer(commit, f.path).is_file()]
        _check_space(cache.folder, sum(f.size for f in missing), what)
        # Read by the converter as they arrive: every file but the ones it reads before
        # writing (metadata.json, Python sources), which are downloaded first.
        first = [f for f in missing if f.path.endswith(_READ_FIRST)]
        later = [f for f in missing if not f.path.endswith(_READ_FIRST)]
        task = self.progress.task(f"build/{name}", sum(f.size for f in missing), "B") \
            if missing else SILENT_TASK
        done = self._downloaded_once(name, missing, len(later), task)
        for file in first:
            self._call(what, partial(cache.fetch, file, commit, self._url(file, commit), _headers(),
                                     on_bytes=task.advance))
        done()
        prefix = f"build/{name}/"
        pending = [_Transfer(name, f, Arrival(cache.pointer(commit, f.path), f.size), done, task)
                   for f in later]
        arriving = {t.file.path.removeprefix(prefix): t.arrival for t in pending}
        return FetchedVariant(cache.pointer(commit, f"build/{name}"), cache.folder, arriving), pending

    def variant_files(self, revision: Revision, name: str) -> list[RemoteFile]:
        """The files of ``build/<name>`` at the revision's commit, as the Hub lists them."""
        commit = revision.commit
        assert commit is not None
        return self._call(f"listing build/{name}", lambda: hub_answers.remote_files(
            self._tree(f"build/{name}", commit, recursive=True), f"build/{name}",
            f"{self.repo_id} at {commit[:12]}"))

    def check_lock(self, name: str, commit: str, files: list[RemoteFile]) -> None:
        """Refuse a variant whose listing does not hash to what kernels.lock recorded."""
        if self.locked_variants is None:
            return
        expected = self.locked_variants.get(name)
        if expected is None:
            raise LockError(f"{self.repo_id}: build/{name} at {commit[:12]} is not in kernels.lock; "
                            "refusing to convert what was not locked (lock it again, or leave it "
                            "out with --variant/--backend/--torch)")
        actual = variant_lock_hash(files, name)
        if actual != expected:
            raise LockError(f"{self.repo_id}: build/{name} at {commit[:12]} hashes to {actual}, "
                            f"kernels.lock says {expected}; refusing to convert files that are not "
                            "what was locked")

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """({tag: commit}, {branch: commit}) of the repository (offline: from the HF cache)."""
        return self._cached_refs() if self.offline else self._refs()

    def _fetch_arriving(self, commit: str, cache: HubCacheRepo, transfer: _Transfer,
                        stop: threading.Event) -> None:
        file, arrival = transfer.file, transfer.arrival
        try:
            self._call(f"downloading build/{transfer.variant}", partial(
                cache.fetch, file, commit, self._url(file, commit), _headers(), arrival, stop,
                transfer.task.advance))
        except BaseException:
            arrival.failed()
            raise
        arrival.finished()
        transfer.done()

    def _downloaded_once(self, name: str, missing: list[RemoteFile], parts: int,
                         task: Task = SILENT_TASK) -> Callable[[], None]:
        """A callable that says "downloaded build/<name>: ..." when called for the last
        time: once for the files read first, then once per other file (``parts``)."""
        left, lock, started = parts + 1, threading.Lock(), time.monotonic()

        def one_done() -> None:
            nonlocal left
            with lock:
                left -= 1
                if left or not missing:
                    return
            task.finish()
            size = sum(f.size for f in missing)
            self.progress(f"downloaded build/{name}: {len(missing)} files, {size / 1e6:.1f} MB "
                          f"in {time.monotonic() - started:.1f} s")
        return one_done

    def _url(self, file: RemoteFile, commit: str) -> str:
        from huggingface_hub import hf_hub_url

        return str(hf_hub_url(self.repo_id, file.path, repo_type=self.repo_type, revision=commit))

    def card(self, revision: Revision) -> str | None:
        """README.md (else CARD.md) at the commit; None when there is none or it cannot be
        read. Fetched like the variants' files (listed, then one GET checked against the
        listing into the HF cache), not with ``hf_hub_download``, which names the cached
        blob after the server's ETag header and so would write wherever a hostile server's
        ETag points."""
        commit = revision.commit
        assert commit is not None
        if self.offline:  # the cached copy, as hf_hub_download would answer offline
            for filename in _CARDS:
                if (cached := self._snapshot_dir(commit) / filename).is_file():
                    return cached.read_text("utf-8", errors="replace")
            return None
        try:
            listed = self._call("listing the repository", lambda: hub_answers.remote_files(
                self._tree("", commit), "", f"{self.repo_id} at {commit[:12]}"))
            by_name = {file.path: file for file in listed}
            card = next((by_name[name] for name in _CARDS if name in by_name), None)
            if card is None or card.size > _MAX_CARD:
                return None
            path = self._call("reading the card", partial(
                self._cache().fetch, card, commit, self._url(card, commit), _headers()))
        except SourceError:
            return None  # the card is optional: the wheel's description is then the default
        return path.read_text("utf-8", errors="replace")
