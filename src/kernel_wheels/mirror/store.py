"""Where a mirror is written: a folder, or an S3-compatible bucket.

Both hold the same keys with the same bytes (``files/<wheel>``, ``simple/...``,
``.kernel-wheels/mirror/...``). Object storage has no rename, so every ``put`` must be
complete or absent: a folder writes a temporary file and renames it; S3 ``PutObject`` is
atomic by itself. ``put(..., if_absent=True)`` is the one conditional write the lease
needs: ``O_EXCL``-like (a hard link) for a folder, ``If-None-Match: *`` for S3.

A store is not trusted to be sane: an object read is refused above :data:`MAX_OBJECT`
bytes (declared or read), a listing above :data:`MAX_LIST_PAGES` pages, a million keys
or a quarter of an hour, or whose continuation token comes back, is refused
(:mod:`kernel_wheels.paging`), and every S3 request has ``--timeout`` and the minimum
rate (:mod:`.s3http`) and ``--retries``; each failure is one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..confine import inside
from ..errors import DistributionError, UsageError
from ..network import NetworkSettings
from ..paging import LISTING_SECONDS, Bounds, Step, follow
from ..processes import alive
from ..redaction import one_line

#: Temporary files of a folder destination (removed again; never listed).
TEMP_DIR = ".kernel-wheels/tmp"
#: How often a temporary file is made again when another run removed its folder meanwhile.
_TEMP_TRIES = 100
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
#: The largest object a mirror reads (records, pages, the lease): far above what
#: 100,000 wheels give, far below what would exhaust a machine's memory.
MAX_OBJECT = 256 << 20
#: The most pages (of up to 1,000 keys) a listing may take, and keys: a million keys,
#: four times what a mirror of 100,000 wheels holds. A store that always answers
#: "truncated" with a new token is refused after 1,000 requests (about a minute), not
#: 100,000 (an hour and a half, silent).
MAX_LIST_PAGES = 1_000
LIST_BOUNDS = Bounds(pages=MAX_LIST_PAGES, items=1_000_000, seconds=LISTING_SECONDS)
_READ_CHUNK = 1 << 20
#: The largest wheel a mirror reads back (to judge it): one PutObject's limit, so no
#: wheel the mirror uploaded is larger.
MAX_WHEEL = 5 * 10**9


class Destination(Protocol):
    """A key -> bytes store with atomic puts."""

    description: str

    def get(self, key: str) -> bytes | None:
        """The object's bytes; None when there is none."""
        ...

    def put(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        """Write the whole object at once; with ``if_absent``, only when there is none
        (False: there was one, nothing written)."""
        ...

    def put_file(self, key: str, path: Path) -> None:
        ...

    def delete(self, key: str) -> None:
        """Remove the object (none is not an error)."""
        ...

    def delete_many(self, keys: list[str]) -> None:
        """:meth:`delete` of each (a bucket takes up to 1,000 in one request)."""
        ...

    def keys(self, prefix: str) -> Iterator[str]:
        """Every key under ``prefix`` (which ends with ``/``), in no particular order."""
        ...

    def local_copy(self, key: str, limit: int) -> contextlib.AbstractContextManager[Path | None]:
        """The object as a local file while the block runs (None: there is none): a
        folder's own file, a bucket's object downloaded to a temporary file, read no
        further than ``limit`` bytes and one more (:data:`MAX_WHEEL` at most), so that a
        larger object shows as larger without being read whole."""
        ...


class FolderDestination:
    def __init__(self, root: Path) -> None:
        self.root = root.absolute()
        self.description = str(root)
        self._counter = 0
        self._lock = threading.Lock()
        #: Folders proven inside the root (links followed): a mirror of 100,000 wheels
        #: asks for a few hundred thousand keys in a few thousand folders.
        self._proven: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:  # to a worker process: no lock, no memo
        return {"root": self.root, "description": self.description}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["root"])  # type: ignore[misc]
        self.description = state["description"]

    def _path(self, key: str) -> Path:
        folder, _, name = key.rpartition("/")
        if folder in self._proven and name and name not in (".", ".."):
            return Path(f"{self.root}/{key}")
        path = inside(self.root, key, "the mirror")
        if path.parent.is_dir():  # a folder made later is proven when first used
            self._proven.add(folder)
        return path

    def _temp(self) -> Path:
        """A temporary file of this process, there (empty) when it is named: another run's
        :meth:`clean_temp` removes the folder when it finds it empty, so a folder made for
        a file not yet written could be gone before the write. Made again when it went
        between the two (a shard's finish beside another's clean-up)."""
        with self._lock:
            self._counter += 1
            count = self._counter
        folder = self.root / TEMP_DIR
        path = folder / f"{os.getpid()}-{threading.get_ident()}-{count}"
        for attempt in range(1, _TEMP_TRIES + 1):
            try:
                folder.mkdir(parents=True, exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
                return path
            except FileNotFoundError:  # emptied and removed by another run just now
                if attempt == _TEMP_TRIES:
                    raise
        raise AssertionError("unreachable")

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:  # O_NONBLOCK: a FIFO planted at a key does not hang the run
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            return None
        with os.fdopen(fd, "rb") as stream:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise DistributionError(f"{self.description}: {key} is not a regular file")
            if info.st_size > MAX_OBJECT:
                raise DistributionError(f"{self.description}: {key} is {info.st_size} bytes, more "
                                        f"than the {MAX_OBJECT} a mirror's object may have")
            data = stream.read(MAX_OBJECT + 1)
        if len(data) > MAX_OBJECT:
            raise DistributionError(f"{self.description}: {key} is larger than the {MAX_OBJECT} "
                                    "bytes a mirror's object may have")
        return data

    def put(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = self._temp()
        temp.write_bytes(data)
        temp.chmod(0o644)
        if not if_absent:
            os.replace(temp, path)
            return True
        try:  # a link fails when the name exists: the folder's conditional put
            os.link(temp, path)
            return True
        except FileExistsError:
            return False
        finally:
            temp.unlink()

    def put_file(self, key: str, path: Path) -> None:
        final = self._path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        with path.open("rb") as source:
            temp = self._temp()
            with temp.open("wb") as out:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
        temp.chmod(0o644)
        os.replace(temp, final)

    def delete(self, key: str) -> None:
        self.delete_many([key])

    def delete_many(self, keys: list[str]) -> None:
        folders = set()
        for key in keys:
            path = self._path(key)
            path.unlink(missing_ok=True)
            folders.add(path.parent)
        # No empty folders left behind (a bucket has none); each tried once, deepest first.
        tried: set[Path] = set()
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            while folder != self.root and folder.is_relative_to(self.root) and folder not in tried:
                tried.add(folder)
                try:
                    folder.rmdir()
                except OSError:
                    break
                folder = folder.parent

    def keys(self, prefix: str) -> Iterator[str]:
        base = self._path(prefix.rstrip("/")) if prefix else self.root
        skip = str(self.root / TEMP_DIR)
        strip = len(str(self.root)) + 1
        stack = [str(base)]
        while stack:
            folder = stack.pop()
            if folder == skip:
                continue
            try:
                entries = list(os.scandir(folder))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    yield entry.path[strip:]

    @contextlib.contextmanager
    def local_copy(self, key: str, limit: int) -> Iterator[Path | None]:
        """The file itself (never a link, a FIFO or a device: refused, one line)."""
        path = self._path(key)
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            yield None
            return
        if not stat.S_ISREG(info.st_mode):
            raise DistributionError(f"{self.description}: {key} is not a regular file")
        yield path

    def clean_temp(self) -> None:
        """Temporary files of processes that are gone (a killed run's)."""
        folder = self.root / TEMP_DIR
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return
        for entry in entries:
            pid = entry.name.split("-", 1)[0]
            if pid.isdigit() and not alive(int(pid)):
                Path(entry.path).unlink(missing_ok=True)
        for path in (folder, folder.parent):
            try:
                path.rmdir()
            except OSError:
                break


class S3Destination:
    """``s3://bucket/prefix`` through boto3, with the usual AWS environment
    (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``, profiles, and
    ``AWS_ENDPOINT_URL`` for an S3-compatible store)."""

    def __init__(self, bucket: str, prefix: str, client: Any,
                 network: NetworkSettings | None = None) -> None:
        self.bucket, self.prefix, self.client = bucket, prefix, client
        self.network = network or NetworkSettings()
        self.description = f"s3://{bucket}/{prefix}".rstrip("/")

    def __getstate__(self) -> dict[str, Any]:  # to a worker process: a client of its own
        return {"bucket": self.bucket, "prefix": self.prefix, "network": self.network}

    def __setstate__(self, state: dict[str, Any]) -> None:
        network = state.get("network") or NetworkSettings()
        self.__init__(state["bucket"], state["prefix"], _s3_client(network), network)  # type: ignore[misc]

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def check(self) -> None:
        """The bucket is there and the credentials reach it (one HEAD request)."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        endpoint = os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except NoCredentialsError:
            raise UsageError(f"{self.description}: no AWS credentials: set AWS_ACCESS_KEY_ID and "
                             "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), and AWS_ENDPOINT_URL for a "
                             "store other than AWS S3") from None
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket"):
                raise DistributionError(f"{self.description}: no such bucket {self.bucket} at "
                                        f"{endpoint} (NoSuchBucket): create it, or check the "
                                        "name and AWS_ENDPOINT_URL") from None
            if code in ("403", "401", "AccessDenied", "InvalidAccessKeyId",
                        "SignatureDoesNotMatch"):
                raise DistributionError(f"{self.description}: {endpoint} refused the credentials "
                                        f"(HTTP {code}): check AWS_ACCESS_KEY_ID and "
                                        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)") from None
            raise self._failed("checking the bucket", "", exc) from None
        except BotoCoreError as exc:  # no answer from the endpoint, a bad region...
            raise DistributionError(f"{self.description}: cannot reach {endpoint} ({exc}): "
                                    "check AWS_ENDPOINT_URL and the network") from None

    def _failed(self, what: str, key: str, exc: Exception) -> DistributionError:
        """One line: the store's error code and message (its text, so escaped, cut and
        without the secret key), or the transport's reason (a timeout, a refusal)."""
        error = getattr(exc, "response", None)
        error = error.get("Error", {}) if isinstance(error, dict) else {}
        error = error if isinstance(error, dict) else {}
        secrets = [os.environ.get("AWS_SECRET_ACCESS_KEY", ""), os.environ.get("AWS_SESSION_TOKEN", "")]
        code = one_line(str(error.get("Code") or ""), secrets, 60) or type(exc).__name__
        message = one_line(str(error.get("Message") or ""), secrets, 200)
        reason = getattr(exc, "kwargs", {}).get("error") if not message else None
        detail = message or (one_line(str(reason), secrets, 200) if reason else "")
        hint = f"; {self.network.retries} retries, --timeout {self.network.timeout:g}" \
            if code in _TRANSPORT_FAILURES else ""
        return DistributionError(f"{self.description}: {what} {key} failed ({code}"
                                 f"{': ' + detail if detail else ''}{hint})")

    def get(self, key: str) -> bytes | None:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except self.client.exceptions.NoSuchKey:
            return None
        except Exception as exc:
            raise self._failed("reading", key, exc) from None
        body = answer["Body"]
        try:
            declared = answer.get("ContentLength")
            if isinstance(declared, int) and declared > MAX_OBJECT:
                raise DistributionError(f"{self.description}: {key} is {declared} bytes, more than "
                                        f"the {MAX_OBJECT} a mirror's object may have")
            chunks, size = [], 0
            while chunk := body.read(_READ_CHUNK):
                size += len(chunk)
                if size > MAX_OBJECT:
                    raise DistributionError(f"{self.description}: {key} is larger than the "
                                            f"{MAX_OBJECT} bytes a mirror's object may have")
                chunks.append(chunk)
            return b"".join(chunks)
        except DistributionError:
            raise
        except Exception as exc:
            raise self._failed("reading", key, exc) from None
        finally:
            body.close()

    @contextlib.contextmanager
    def local_copy(self, key: str, limit: int) -> Iterator[Path | None]:
        """The object downloaded to a temporary file (removed after the block)."""
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except self.client.exceptions.NoSuchKey:
            yield None
            return
        except Exception as exc:
            raise self._failed("reading", key, exc) from None
        body = answer["Body"]
        with tempfile.TemporaryDirectory(prefix="kernel-wheels-mirror-") as folder:
            path = Path(folder) / key.rsplit("/", 1)[-1]
            left = min(limit, MAX_WHEEL) + 1
            try:
                with path.open("wb") as out:
                    while left > 0 and (chunk := body.read(min(_READ_CHUNK, left))):
                        out.write(chunk)
                        left -= len(chunk)
            except OSError:
                raise
            except Exception as exc:
                raise self._failed("reading", key, exc) from None
            finally:
                body.close()
            yield path

    def put(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        extra = {"IfNoneMatch": "*"} if if_absent else {}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                   ContentType=_content_type(key), **extra)
            return True
        except Exception as exc:
            answer = getattr(exc, "response", None)
            meta = answer.get("ResponseMetadata") if isinstance(answer, dict) else None
            status = meta.get("HTTPStatusCode") if isinstance(meta, dict) else None
            if if_absent and status in (409, 412):  # there is one (or a put of one is under way)
                return False
            raise self._failed("writing", key, exc) from None

    def put_file(self, key: str, path: Path) -> None:
        try:  # one PutObject (up to 5 GB): never a visible half of a multipart upload
            with path.open("rb") as body:
                self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body,
                                       ContentType=_content_type(key))
        except OSError:
            raise
        except Exception as exc:
            raise self._failed("writing", key, exc) from None

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            raise self._failed("deleting", key, exc) from None

    def delete_many(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = [{"Key": self._key(k)} for k in keys[start:start + 1000]]
            try:
                answer = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch,
                                                                                "Quiet": True})
            except Exception as exc:
                raise self._failed("deleting", keys[start], exc) from None
            if answer.get("Errors"):
                error = answer["Errors"][0]
                raise DistributionError(f"{self.description}: deleting {error.get('Key')} failed "
                                        f"({error.get('Code')})")

    def keys(self, prefix: str) -> Iterator[str]:
        """Page by page, bounded (:data:`LIST_BOUNDS`, :func:`kernel_wheels.paging.follow`):
        a continuation token seen before (a listing that would never end), a truncated
        page without one, more than :data:`MAX_LIST_PAGES` pages or a million keys, or a
        listing longer than a quarter of an hour is refused."""
        strip = len(self._key(""))
        asked = self._key(prefix)
        where = prefix or "/"
        seen: set[str] = set()

        def fetch(token: str | None) -> Step[Any, str | None]:
            extra = {"ContinuationToken": token} if token is not None else {}
            try:
                page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=asked, **extra)
            except Exception as exc:
                raise self._failed("listing", where, exc) from None
            contents = page.get("Contents", ())
            if not page.get("IsTruncated"):
                return Step(contents, len(contents), None)
            following = page.get("NextContinuationToken")
            if not isinstance(following, str) or not following:
                raise DistributionError(f"{self.description}: listing {where} failed (a truncated "
                                        "page without a continuation token)")
            if following in seen:
                raise DistributionError(f"{self.description}: listing {where} failed (the store "
                                        "gave a continuation token again: the listing would "
                                        "never end)")
            seen.add(following)
            return Step(contents, len(contents), following)

        for contents in follow(None, fetch, LIST_BOUNDS, f"{self.description}: listing {where}",
                               DistributionError):
            for item in contents:
                key = item.get("Key") if isinstance(item, dict) else None
                # Only keys under what was asked: a store that lists others names
                # objects the mirror does not own (and must never delete).
                if isinstance(key, str) and key.startswith(asked) and len(key) > strip:
                    yield key[strip:]


def _content_type(key: str) -> str:
    if key.endswith(".html"):
        return "text/html"
    if key.endswith(".json"):
        return "application/json"
    return "application/octet-stream"


def is_index_url(spec: str) -> bool:
    """Whether ``spec`` names an index server (its upload URL) rather than a store."""
    return urlsplit(spec).scheme in ("http", "https")


def open_destination(spec: str, option: str = "--to",
                     network: NetworkSettings | None = None) -> Destination:
    """A folder path, ``s3://bucket[/prefix]``; an index server URL is refused (it has no
    place for the state: the caller pairs it with a store, ``--state``). ``network``:
    the timeout and retries of every S3 request (``--timeout``, ``--retries``)."""
    split = urlsplit(spec)
    if is_index_url(spec):
        raise UsageError(f"{option} {spec}: the mirror's state needs a folder or s3://BUCKET/PREFIX "
                         "(an index server is given as --to, with --state DEST)")
    if split.scheme == "s3":
        bucket, prefix = split.netloc, split.path.strip("/")
        if not _BUCKET.fullmatch(bucket) or ".." in prefix or "//" in prefix:
            raise UsageError(f"{option} {spec}: give s3://BUCKET/PREFIX (a bucket name of 3 to 63 "
                             "lower-case letters, digits, dots and dashes)")
        network = network or NetworkSettings.from_environment()
        destination = S3Destination(bucket, prefix, _s3_client(network), network)
        destination.check()  # before any listing: a wrong bucket or secret fails in seconds
        return destination
    if split.scheme:
        raise UsageError(f"{option} {spec}: give a folder, s3://BUCKET/PREFIX or an http(s):// "
                         "index server URL")
    return FolderDestination(Path(spec))


#: Failures of the transport (no answer from the store): the message names the limits.
_TRANSPORT_FAILURES = frozenset({"ReadTimeoutError", "ConnectTimeoutError", "EndpointConnectionError",
                                 "ConnectionClosedError"})


def _s3_client(network: NetworkSettings) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise UsageError("s3:// destinations need boto3: pip install 'kernel-wheels[s3]'") from None
    from .s3http import pace_client

    # boto3 reads AWS_ENDPOINT_URL, credentials and region from the environment itself.
    # Every request is sent by s3http (paced, --timeout); botocore tries it --retries
    # more times.
    config = Config(retries={"max_attempts": network.retries + 1, "mode": "standard"},
                    connect_timeout=network.timeout, read_timeout=network.timeout,
                    region_name=os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION")
                    or "us-east-1")
    return pace_client(boto3.client("s3", config=config), network)


#: Test hook (docs/mirror.md, tests/test_mirror.py): the process kills itself (SIGKILL)
#: right after its N-th write to the destination, to prove that a run stopped at any
#: write is finished by the next one. A SIGKILL at an exact write cannot be provoked
#: from outside.
FAULT_ENV = "KERNEL_WHEELS_MIRROR_KILL_AFTER_WRITES"


class KillingDestination:
    def __init__(self, inner: Destination, after: int) -> None:
        self.inner, self.after, self.writes = inner, after, 0
        self.description = inner.description

    def _wrote(self) -> None:
        self.writes += 1
        if self.writes >= self.after:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)

    def get(self, key: str) -> bytes | None:
        return self.inner.get(key)

    def put(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        written = self.inner.put(key, data, if_absent=if_absent)
        self._wrote()
        return written

    def put_file(self, key: str, path: Path) -> None:
        self.inner.put_file(key, path)
        self._wrote()

    def delete(self, key: str) -> None:
        self.inner.delete(key)
        self._wrote()

    def delete_many(self, keys: list[str]) -> None:
        for key in keys:  # one write each, as a kill point
            self.delete(key)

    def keys(self, prefix: str) -> Iterator[str]:
        return self.inner.keys(prefix)

    def local_copy(self, key: str, limit: int) -> contextlib.AbstractContextManager[Path | None]:
        return self.inner.local_copy(key, limit)

    def clean_temp(self) -> None:
        if isinstance(self.inner, FolderDestination):
            self.inner.clean_temp()


def with_faults(store: Destination) -> Destination:
    after = os.environ.get(FAULT_ENV)
    return KillingDestination(store, int(after)) if after and after.isdigit() else store
