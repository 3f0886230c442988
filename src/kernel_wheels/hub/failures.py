"""What went wrong when the Hub was asked: the one place that reads huggingface_hub's and
the HTTP stack's exceptions (status, network, offline, authentication, an answer that is
not the Hub's) and says what each means, as a :class:`Failure`. The client
(:mod:`.client`) turns a failure into a retry or into one of our typed errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..confine import shown
from ..errors import KernelWheelsError
from ..network import TransferTooSlow, retry_after_seconds
from ..redaction import one_line
from .files import TransferMismatch

_NETWORK_ERRORS = {"ConnectError", "ConnectTimeout", "ReadTimeout", "TimeoutException",
                   "NetworkError", "TransportError", "ConnectionError", "RemoteProtocolError"}


class Kind(Enum):
    NOT_CACHED = "offline, and not in the HF cache"
    OFFLINE = "offline mode is on"
    GATED = "gated repository"
    NO_REVISION = "no such revision"
    NO_REPOSITORY = "no such repository"
    NO_ENTRY = "no such file or folder"
    REFUSED = "authentication refused"  # 401, 403
    RATE_LIMITED = "rate limited"  # 429
    REJECTED = "request rejected"  # any other 4xx
    TRANSIENT = "no usable answer"  # 5xx, the network, a timeout, a transfer cut short
    UNEXPECTED = "not a Hub answer"  # HTML, broken JSON, JSON of another shape


@dataclass(frozen=True)
class Failure:
    kind: Kind
    #: The HTTP status, when the Hub answered with one.
    status: int | None = None
    #: A short, token-free description: what a retry warning and the last error show
    #: (``HTTP 500``, ``timed out``), or for an unexpected answer ``TypeName: detail``.
    reason: str = ""
    #: The seconds a 429 answer asks to wait (Retry-After), if it says.
    retry_after: float | None = None

    @property
    def transient(self) -> bool:
        """Worth another try: the next answer may be a good one."""
        return self.kind in (Kind.TRANSIENT, Kind.RATE_LIMITED)


def judge(exc: BaseException, offline: bool) -> Failure | None:
    """What ``exc``, raised while the Hub was asked, means; None for an exception that is
    not the Hub's (ours, or a local file system's): the caller lets it go on."""
    import httpx2  # loaded with huggingface_hub's errors, whose HTTP errors are its
    from huggingface_hub import errors

    if isinstance(exc, KernelWheelsError):  # ours, one line already (our NetworkError is
        return None  # named like the HTTP stack's: never judged as a network failure)
    if isinstance(exc, errors.LocalEntryNotFoundError):  # before EntryNotFoundError, its base
        # huggingface_hub reports a file it could not locate (HTTP 403, 404, 5xx, a
        # timeout, a reset) as this; its cause is judged instead, like the same answer to
        # any other call.
        cause = exc.__cause__
        if isinstance(cause, (errors.HfHubHTTPError, errors.EntryNotFoundError)) \
                or cause is not None and is_network_error(cause):
            return judge(cause, offline)
        return Failure(Kind.NOT_CACHED) if offline else Failure(Kind.TRANSIENT, reason=reason(cause or exc))
    status = status_of(exc)
    for error, kind in ((errors.GatedRepoError, Kind.GATED),  # before its base, RepositoryNotFound
                        (errors.RevisionNotFoundError, Kind.NO_REVISION),
                        (errors.RepositoryNotFoundError, Kind.NO_REPOSITORY),
                        (errors.EntryNotFoundError, Kind.NO_ENTRY),
                        (errors.OfflineModeIsEnabled, Kind.OFFLINE)):
        if isinstance(exc, error):
            return Failure(kind, status, reason(exc))
    if isinstance(exc, errors.HfHubHTTPError):
        return _http_failure(exc, status)
    if isinstance(exc, TransferMismatch):  # a bad transfer: the next one may be good
        return Failure(Kind.TRANSIENT, reason=str(exc))
    if isinstance(exc, (OSError, ValueError)):
        # A download cut short or a file that arrived shorter than announced
        # ("consistency check failed") lands here; so do network errors.
        if is_network_error(exc) or "consistency check" in str(exc).lower() \
                or isinstance(exc, (ConnectionError, TimeoutError)):
            return Failure(Kind.TRANSIENT, reason=reason(exc))
        # HTML or broken JSON where JSON was asked for; an OSError of the file system is ours
        return _unexpected(exc) if isinstance(exc, ValueError) else None
    if isinstance(exc, (TypeError, KeyError, AttributeError, RecursionError)):
        # huggingface_hub read an answer of the wrong shape (a field missing, a list where
        # an object belongs; or JSON nested deeper than its parser recurses): a server
        # that is not a Hub, or a hostile one.
        return _unexpected(exc)
    if isinstance(exc, Exception) and is_network_error(exc):
        return Failure(Kind.TRANSIENT, reason=reason(exc))
    if isinstance(exc, httpx2.HTTPError):  # a body it cannot decode, redirects without end
        return _unexpected(exc)
    return None


def _http_failure(exc: BaseException, status: int | None) -> Failure:
    if status in (401, 403):
        return Failure(Kind.REFUSED, status)
    if status == 429:
        after = retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))
        return Failure(Kind.RATE_LIMITED, status, f"HTTP {status}", after)
    if status is not None and status < 500:
        return Failure(Kind.REJECTED, status, f"HTTP {status}")
    return Failure(Kind.TRANSIENT, status, f"HTTP {status}")


def _unexpected(exc: BaseException) -> Failure:
    detail = one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, limit=80)
    return Failure(Kind.UNEXPECTED, reason=f"{type(exc).__name__}: {detail}")


def is_network_error(exc: BaseException) -> bool:
    """A failure to reach the Hub or to hear it out, by the HTTP stack's or the socket's
    exception classes (by name: the HTTP stack is imported only when it is used)."""
    return any(cls.__name__ in _NETWORK_ERRORS for cls in type(exc).__mro__)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of the answer an exception carries, if any."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def reason(exc: BaseException) -> str:
    """A short, token-free description of a failed transfer."""
    name = type(exc).__name__
    if isinstance(exc, TransferTooSlow):
        return str(exc)[:160]
    if "Timeout" in name or isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).splitlines()[0] if str(exc) else name
    return text[:160]


def unusable(exc: BaseException) -> str:
    """``TypeName: first line`` of an exception, on one line and short (it is shown)."""
    text = str(exc).splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {shown(text, 160)}" if text else type(exc).__name__
