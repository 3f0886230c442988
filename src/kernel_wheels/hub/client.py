"""The Hub's API, as every command asks it: the Hugging Face Hub or a Hub-compatible server,
through ``huggingface_hub``. HF_ENDPOINT, HF_TOKEN, HF_HOME and HF_HUB_OFFLINE are
honoured because every call goes through huggingface_hub's own configuration
(:mod:`.session`).

One retry loop (:meth:`HubClient.call`): network failures, timeouts, 429 and 5xx answers
are tried again with backoff (a server's Retry-After honoured), each try announced; any
other failure, judged once by :func:`.failures.judge`, is one of our typed errors with
one line naming the repository, never a traceback and never the token. Listing pages are
read on the endpoint's own origin only (:meth:`HubClient.pages`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, TypeVar

from ..confine import shown
from ..errors import (
    AuthenticationError,
    KernelWheelsError,
    NetworkError,
    RepoNotFoundError,
    RevisionNotFoundError,
    SourceError,
    UnexpectedAnswerError,
    UsageError,
)
from ..network import MAX_RETRY_AFTER, NetworkSettings, origin
from ..progress import counted
from ..redaction import one_line, strip_userinfo
from . import session
from .failures import Failure, Kind, judge, unusable

T = TypeVar("T")
#: Pages of one listing (the Hub gives 1,000 entries a page).
MAX_PAGES = 1000
#: Makes the error for "not found" answers, in place of the general one.
Missing = Callable[[], SourceError]


@dataclass(frozen=True)
class HubClient:
    """The endpoint as HF_ENDPOINT and HF_HUB_OFFLINE name it when the client is made
    (:func:`open_client`), the network settings its calls obey, and where a retry is
    announced. ``contained``: an exception the Hub's answer provokes that is not judged
    (:func:`.failures.judge`) is a :class:`NetworkError` too, not an exception of another
    kind (a server: nothing may escape to a request)."""

    endpoint: str
    network: NetworkSettings
    offline: bool
    warn: Callable[[str], None] = field(default=lambda _: None, compare=False)
    contained: bool = False

    @property
    def shown_endpoint(self) -> str:
        """How messages name the endpoint: HF_ENDPOINT may carry a user and password."""
        return strip_userinfo(self.endpoint)

    @cached_property
    def api(self) -> Any:
        """huggingface_hub's API client, made on first use: a conversion from the HF cache
        (HF_HUB_OFFLINE=1) never needs it, and importing it costs a tenth of a second."""
        from huggingface_hub import HfApi

        return HfApi()

    def token_set(self) -> bool:
        from huggingface_hub import get_token

        return get_token() is not None

    # -- the one retry loop ---------------------------------------------------------
    def call(self, what: str, fn: Callable[[], T], repo_id: str, repo_types: tuple[str, ...],
             missing: Missing | None = None) -> T:
        """``fn()``, a question about ``repo_id`` (of one of ``repo_types``), tried again
        on a transient failure; any other failure is one typed error. ``missing`` makes
        the error for "not found" answers: Hub-compatible servers give a missing
        repository, revision or file as 401, 404 or "entry not found"."""
        try:
            return self.retried(what, fn)
        except Exception as exc:
            failure = judge(exc, self.offline)
            if failure is None:
                if self.contained and not isinstance(exc, KernelWheelsError):
                    raise NetworkError(f"{what} of {repo_id}: {self.shown_endpoint} sent an answer "
                                       f"that cannot be used ({unusable(exc)})") from None
                raise
            if failure.transient and not _too_long(failure):  # every try used
                raise NetworkError(f"{what}: no usable answer from {self.shown_endpoint} after "
                                   f"{counted(self.network.retries + 1, 'try', 'tries')} "
                                   f"({failure.reason}); the timeout is {self.network.timeout:g} s "
                                   "(--timeout, KERNEL_WHEELS_TIMEOUT)") from None
            raise self._error(failure, what, repo_id, repo_types, missing) from None

    def retried(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()``, tried again with backoff while it fails transiently (a network
        failure, a timeout, 429 or 5xx); the last failure, or any other, goes up as it
        was raised, for the caller to judge."""
        tries = self.network.retries + 1
        for attempt in range(1, tries + 1):
            try:
                return fn()
            except Exception as exc:
                failure = judge(exc, self.offline)
                if failure is None or not failure.transient or _too_long(failure) or attempt == tries:
                    raise
            delay = self.network.delay(attempt, failure.retry_after)
            self.warn(f"warning: {what}: {failure.reason}; trying again in {delay:g} s "
                      f"({attempt}/{tries - 1})")
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _error(self, failure: Failure, what: str, repo_id: str, repo_types: tuple[str, ...],
               missing: Missing | None) -> SourceError:
        """The one line a failure that is not tried again ends with."""
        endpoint = self.shown_endpoint
        match failure.kind:
            case Kind.NO_REVISION | Kind.NO_REPOSITORY | Kind.NO_ENTRY if missing is not None:
                return missing()
            case Kind.NO_REVISION:
                return RevisionNotFoundError(f"{what}: revision not found in {repo_id}")
            case Kind.NO_REPOSITORY:
                return RepoNotFoundError(self.not_found(repo_id, repo_types))
            case Kind.NO_ENTRY:
                return SourceError(f"{what}: not found in {repo_id}")
            case Kind.NOT_CACHED:
                return SourceError(f"HF_HUB_OFFLINE=1 and {repo_id} is not in the cache for this "
                                   "request (convert it once online first)")
            case Kind.OFFLINE:
                return SourceError(f"{what}: HF_HUB_OFFLINE=1 and {repo_id} is not in the cache "
                                   "for this request")
            case Kind.GATED:
                return AuthenticationError(f"{repo_id} is gated: accept its terms on the Hub, then "
                                           "set HF_TOKEN to a token of that account")
            case Kind.REFUSED:
                return AuthenticationError(self._refused(repo_id, failure.status))
            case Kind.RATE_LIMITED:
                return NetworkError(f"{what}: {endpoint} is rate limiting (HTTP 429) and asks to "
                                    f"wait {failure.retry_after:.0f} s; try again later")
            case Kind.REJECTED:
                return SourceError(f"{what} failed: HTTP {failure.status} from {endpoint}")
            case _:
                return UnexpectedAnswerError(
                    f"{what}: {endpoint} answered for {repo_id} with something that is not a Hub "
                    f"answer ({failure.reason}); is HF_ENDPOINT a Hub or a Hub mirror?")

    def not_found(self, repo_id: str, repo_types: tuple[str, ...]) -> str:
        types = " or ".join(repo_types)
        hint = ("; if it is private, check that HF_TOKEN grants access to it" if self.token_set()
                else "; if it is private or gated, set HF_TOKEN")
        return f"repository {repo_id} not found on {self.shown_endpoint} (as {types} repo){hint}"

    def _refused(self, repo_id: str, status: int | None) -> str:
        if self.token_set():
            return (f"{self.shown_endpoint} refused access to {repo_id} (HTTP {status}): the token "
                    "in HF_TOKEN (not shown) lacks access")
        return (f"{repo_id} needs authentication (HTTP {status}): set HF_TOKEN to a token "
                "with read access")

    # -- listings -------------------------------------------------------------------
    def pages(self, path: str, params: dict[str, Any] | None, where: str, what: str) -> Iterator[Any]:
        """The pages of the Hub listing at ``path`` (``/api/...``), as JSON. Read here
        rather than through huggingface_hub's ``paginate``, which follows a page's
        ``Link: next`` to any URL, forever: the next page must be on the endpoint's own
        origin, and there are at most ``MAX_PAGES`` of them."""
        from huggingface_hub import get_session, hf_raise_for_status

        def page_at(url: str, params: dict[str, Any] | None) -> Any:
            response = get_session().get(url, params=params, headers=session.headers())
            hf_raise_for_status(response)
            return response

        next_url: str | None = f"{self.endpoint.rstrip('/')}{path}"
        for _page in range(MAX_PAGES):
            assert next_url is not None
            # A page is asked again on a transient failure, as every other Hub question.
            response = self.retried(where, partial(page_at, next_url, params))
            try:
                page = response.json()
            except RecursionError:  # JSON nested deeper than Python's parser recurses
                raise UnexpectedAnswerError(f"{where}: a page of the listing of {what} is nested too "
                                            "deeply to be a Hub answer") from None
            yield page
            next_url, params = response.links.get("next", {}).get("url"), None
            if next_url is None:
                return
            if origin(next_url) != origin(self.endpoint):
                raise UnexpectedAnswerError(f"{where}: the listing's next page is on another host "
                                            f"({shown(next_url, 80)}); refusing to follow it")
        raise UnexpectedAnswerError(f"{where}: the listing of {what} goes on "
                                    f"for more than {MAX_PAGES} pages")

    def publisher_flag(self, organisation: str) -> bool | None:
        """The Hub's ``trustedKernelPublisher`` flag of an organisation, asked as the
        kernels library asks (the organisation overview, HF_ENDPOINT, the token if one is
        set), once and without retries: True or False as the Hub says (a namespace that
        is no organisation, HTTP 404: False); None when it cannot be known (offline, an
        error, an answer that is not the Hub's)."""
        if self.offline:
            return None
        try:
            info = self.api.get_organization_overview(organisation)
        except Exception as exc:  # a network error, an answer of another shape: not known
            failure = judge(exc, self.offline)
            return False if failure is not None and failure.status == 404 else None
        return getattr(info, "trustedKernelPublisher", False) is True


def _too_long(failure: Failure) -> bool:
    """A 429 that asks to wait longer than a run should: an error, not a wait."""
    return failure.retry_after is not None and failure.retry_after > MAX_RETRY_AFTER


def open_client(network: NetworkSettings | None = None, warn: Callable[[str], None] = lambda _: None,
                *, contained: bool = False) -> HubClient:
    """A client of the endpoint HF_ENDPOINT names (checked), configured before its first
    request (our timeout, the hook that keeps the token from any other host). Making one
    resets huggingface_hub's shared HTTP client: make them before any thread uses it."""
    from huggingface_hub import constants

    endpoint = constants.ENDPOINT
    _check_endpoint(endpoint)
    client = HubClient(endpoint, network or NetworkSettings.from_environment(),
                       bool(constants.HF_HUB_OFFLINE), warn, contained)
    if not client.offline:  # offline, no request is made (and its HTTP stack is not loaded)
        session.configure(client.network)
    return client


def _check_endpoint(endpoint: str) -> None:
    """HF_ENDPOINT must be a URL: without a scheme every request fails in a way that
    looks like a network fault (and would be retried as one)."""
    scheme = endpoint.partition("://")[0].lower() if "://" in endpoint else ""
    if scheme not in ("http", "https"):
        shown_endpoint = one_line(strip_userinfo(endpoint), limit=200)
        raise UsageError(f"HF_ENDPOINT '{shown_endpoint}' is not an http(s) URL: write it with its "
                         f"scheme, e.g. http://{shown_endpoint.split('://')[-1]} or https://...")
