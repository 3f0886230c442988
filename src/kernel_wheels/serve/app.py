"""The ASGI application: routes, content negotiation, authentication and access logs.

Routes::

    GET /                                  a landing page naming the indexes
    GET /healthz                           200 and a small JSON (503 when the cache is not writable)
    GET /simple/                           every project          (PEP 503 HTML / PEP 691 JSON)
    GET /simple/<project>/                 every wheel of it
    GET /<target>/simple/[<project>/]      what fits <target>     (docs/index-scheme.md)
    GET /files/<wheel>                     the wheel, converted on its first request
    GET /files/<wheel>.metadata            its METADATA (PEP 658), likewise

What may wait long (the Hub, a conversion) runs in pools of its own and is awaited on
the event loop (:mod:`.flight`), so the worker threads that open cached files and scan
the cache are never held by the Hub; a page whose listing is fresh is answered without
any thread (it reads at most the small facts file of each of its wheels).

Every handler answers an error with one line (502 when the Hub failed or sent something
unusable, 500 when we did) and logs it (``request-failed``); nothing escapes as a bare
500 or a traceback.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio.to_thread
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..convert.output import OutputFolder
from ..errors import (
    KernelWheelsError,
    ListingUnavailableError,
    SourceError,
    UsageError,
    WheelUnavailableError,
)
from ..hub.failures import unusable
from ..index import simple
from ..index.targets import Target, parse_target_key
from ..index.wheelfacts import WheelFacts
from ..network import NetworkSettings
from .auth import Authenticator, BasicAuth, Users
from .cache import WheelCache
from .catalog import (
    Catalog,
    HubListing,
    KernelHealth,
    KernelListing,
    ServedWheel,
    all_wheels,
    listing_repositories,
)
from .conversions import BackOff, Conversions, OpenedFile
from .flight import SingleFlight
from .logs import AccessLog, EventLog, json_hub_logs
from .negotiation import SUPPORTED, negotiate
from .pages import entries, for_target, landing_page, target_keys
from .settings import HTPASSWD_VARIABLE, ServeSettings

if TYPE_CHECKING:
    from ..hub.repository import HubRepository
    from ..sources.hub import HubSource

_CHUNK = 256 << 10
#: Threads that refresh Hub listings, per worker process (one refresh per kernel at a time).
_LISTING_THREADS = 4
Handler = Callable[["Handlers", Request], Awaitable[Response]]


class OpenedFileResponse(Response):
    """Sends a file that is already open (opened before any eviction could remove its
    name), in chunks read in a worker thread; immutable, with its sha256 as ETag."""

    def __init__(self, opened: OpenedFile, media_type: str, not_modified: bool) -> None:
        self.opened = opened
        self.status_code = 304 if not_modified else 200
        self.background = None
        self.media_type = media_type
        self.body = b""
        self.raw_headers = [
            (b"etag", f'"{opened.sha256}"'.encode()),
            (b"cache-control", b"public, max-age=31536000, immutable"),
        ]
        if not not_modified:
            self.raw_headers += [(b"content-type", media_type.encode()),
                                 (b"content-length", str(opened.size).encode())]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = self.opened.stream
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            if self.status_code == 304 or scope["method"] == "HEAD":
                await send({"type": "http.response.body", "body": b""})
                return
            while True:
                chunk = await anyio.to_thread.run_sync(stream.read, _CHUNK)
                await send({"type": "http.response.body", "body": chunk,
                            "more_body": bool(chunk)})
                if not chunk:
                    return
        finally:
            stream.close()


def _line(status: int, message: str) -> PlainTextResponse:
    first = next((line for line in message.splitlines() if line.strip()), "error")
    return PlainTextResponse(first + "\n", status_code=status)


def one_line_errors(handler: Handler) -> Handler:
    """Any failure of ``handler`` as one line: 502 for the Hub's (unreachable, refused,
    an answer that cannot be used, a name that would lead out of the cache), 500 for
    ours; each is logged with its reason."""
    @functools.wraps(handler)
    async def guarded(self: Handlers, request: Request) -> Response:
        try:
            return await handler(self, request)
        except WheelUnavailableError as exc:
            status, reason = (502 if exc.upstream else 500), exc.message
        except (ListingUnavailableError, SourceError) as exc:  # the Hub's, ambiguous versions
            status, reason = 502, exc.message
        except KernelWheelsError as exc:
            status, reason = 500, exc.message
        except Exception as exc:  # a bug of ours: one line for the client, the type logged
            status, reason = 500, f"internal error ({unusable(exc)})"
        self.events.write("request-failed", path=request.url.path, status=status, reason=reason)
        return _line(status, reason)
    return guarded


class Handlers:
    """The route handlers over one catalog, cache and conversion queue."""

    def __init__(self, catalog: Catalog, cache: WheelCache, conversions: Conversions,
                 events: EventLog, pools: tuple[ThreadPoolExecutor, ...] = ()) -> None:
        self.catalog, self.cache, self.conversions, self.events = catalog, cache, conversions, events
        self.pools = pools

    def routes(self) -> list[Route]:
        return [
            Route("/", self.landing),
            Route("/healthz", self.health),
            Route("/simple/", self.index_root),
            Route("/simple/{project}/", self.project_page),
            Route("/files/{filename}", self.file),
            Route("/{target}/simple/", self.index_root),
            Route("/{target}/simple/{project}/", self.project_page),
        ]

    @asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        def prepare() -> None:
            self.cache.prepare()
            OutputFolder(self.cache.staging).remove_stale_staging()  # of processes that died
            self.cache.evict()  # the limit may have been lowered since the last run
            # Every kernel listed before the first request (the start-up check stored
            # the listings; one that could not be listed is asked again, and /healthz
            # says "degraded" until it is).
            self.catalog.list_unknown(self.pools[0])

        await run_in_threadpool(prepare)
        self.events.write("ready", version=__version__)
        try:
            yield
        finally:
            for pool in self.pools:  # requests in flight have ended (graceful shutdown)
                pool.shutdown(wait=False, cancel_futures=True)
            self.events.write("stopped")

    # -- helpers ------------------------------------------------------------------------
    async def _listings(self) -> list[KernelListing]:
        return await self.catalog.listings()

    @staticmethod
    def _target(request: Request) -> Target | None:
        key = request.path_params.get("target")
        return parse_target_key(key) if key is not None else None

    # -- routes -------------------------------------------------------------------------
    @one_line_errors
    async def landing(self, request: Request) -> Response:
        listings = await self._listings()
        return HTMLResponse(landing_page([k.project for k in self.catalog.kernels.values()],
                                         target_keys(all_wheels(listings))))

    @one_line_errors
    async def health(self, request: Request) -> Response:
        """Checks what this process needs to serve: the cache folder is writable. The
        Hub is not asked (a Hub outage is served from the cache); the last listing
        attempts are reported: "degraded" while a kernel cannot be listed at all. Which
        kernels and why is told to authenticated clients (everyone without --auth-file)."""
        writable = await run_in_threadpool(self.cache.writable)
        usage = await run_in_threadpool(self.cache.usage)
        kernels = self.catalog.health()
        degraded = any(k.state == "unlisted" for k in kernels)
        body: dict[str, Any] = {
            "status": "cache not writable" if not writable else "degraded" if degraded else "ok",
            "version": __version__,
            **self.catalog.status(),
            "ambiguous": sum(len(k.ambiguous) for k in kernels),
            "conversions": {"running": self.conversions.flights.running(),
                            "waiting": self.conversions.waiting},
            "cache": {"wheels": usage.wheels, "bytes": usage.bytes, "limit": usage.limit,
                      "writable": writable},
        }
        state = request.scope.get("state", {})
        if not state.get("authentication") or state.get("user"):
            body["problems"] = [_problem(k) for k in kernels
                                if k.state in ("unlisted", "stale") or k.ambiguous]
        return JSONResponse(body, status_code=200 if writable else 503)

    @one_line_errors
    async def index_root(self, request: Request) -> Response:
        try:
            target = self._target(request)
        except UsageError as exc:
            return _line(404, exc.message)
        form = negotiate(request.headers.get("accept"), request.query_params.get("format"))
        if form is None:
            return _line(406, f"no acceptable form; this index serves {SUPPORTED}")
        listings = await self._listings()
        projects = [listing.kernel.project for listing in listings
                    if for_target(listing.wheels, target)]
        body = simple.render_root_json(projects) if form.json else simple.render_root_html(projects)
        return Response(body, headers={"vary": "Accept", "cache-control": "no-cache"},
                        media_type=form.content_type)

    @one_line_errors
    async def project_page(self, request: Request) -> Response:
        try:
            target = self._target(request)
        except UsageError as exc:
            return _line(404, exc.message)
        asked = request.path_params["project"]
        kernel = self.catalog.kernel(asked)
        if kernel is None:
            return _line(404, f"no project {canonicalize_name(asked)} here")
        if asked != kernel.project:  # PEP 503: the normalised name is the page's URL
            return RedirectResponse(f"../{kernel.project}/", status_code=301)
        form = negotiate(request.headers.get("accept"), request.query_params.get("format"))
        if form is None:
            return _line(406, f"no acceptable form; this index serves {SUPPORTED}")
        listing = await self.catalog.current(kernel)  # ListingUnavailableError: a 502
        # Only what the policy admits: the catalog's refusals, the cached wheels' verdicts.
        wheels = for_target(await self.conversions.admitted(listing.wheels), target)
        if not wheels:
            where = f"for {target.key}" if target else "yet"
            return _line(404, f"no wheel of {kernel.project} {where}")
        listed = entries(wheels, self._facts, depth=2 if target is None else 3)
        body = simple.render_project_json(kernel.project, listed) if form.json else \
            simple.render_project_html(kernel.project, listed)
        return Response(body, headers={"vary": "Accept", "cache-control": "no-cache"},
                        media_type=form.content_type)

    def _facts(self, wheel: ServedWheel) -> WheelFacts | None:
        return self.cache.known_facts(wheel.commit, wheel.filename)

    @one_line_errors
    async def file(self, request: Request) -> Response:
        filename = request.path_params["filename"]
        metadata = filename.endswith(".whl.metadata")
        wheel_name = filename.removesuffix(".metadata") if metadata else filename
        try:
            project = parse_wheel_filename(wheel_name)[0]
        except InvalidWheelFilename:
            return _line(404, f"no file {filename} here")
        wheel = await self.catalog.find(project, wheel_name)
        if wheel is None:
            return _line(404, f"no file {wheel_name} here")
        opened = await self.conversions.open(wheel, metadata)
        not_modified = request.headers.get("if-none-match") == f'"{opened.sha256}"'
        media_type = "text/plain; charset=utf-8" if metadata else "application/octet-stream"
        return OpenedFileResponse(opened, media_type, not_modified)


def _slash_redirect(request: Request) -> Response | None:
    """``/simple/img2gray`` -> ``./img2gray/``, when the path with a slash added is a page.

    Starlette's own slash redirect builds an absolute URL from the request's Host
    header, which any client sets: behind a cache that would send other users to a host
    an attacker names. A relative reference needs no host, and works behind any path
    prefix. ``./`` and the quoted last segment keep it relative: a segment such as
    ``\\evil.example`` or ``javascript:x`` cannot become a host or a scheme."""
    path = request.scope["path"]
    if path.endswith("/"):
        return None
    scope = {**request.scope, "path": path + "/"}
    if not any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
        return None
    query = request.scope.get("query_string", b"").decode("latin-1")
    location = "./" + quote(path.rsplit("/", 1)[1], safe="") + "/" + (f"?{query}" if query else "")
    return RedirectResponse(location, status_code=307)


async def _no_such_page(request: Request, exc: Exception) -> Response:
    """Paths no route takes (``/files/a/b``, an encoded ``..``): one line too; a page's
    path without its final slash is sent to the page (relatively)."""
    status = getattr(exc, "status_code", 404)
    if status == 404 and (redirect := _slash_redirect(request)) is not None:
        return redirect
    return _line(status, "no such page here" if status == 404 else "method not allowed")


def _problem(kernel: KernelHealth) -> dict[str, Any]:
    problem: dict[str, Any] = {"repo": kernel.repo, "state": kernel.state}
    if kernel.reason:
        problem["reason"] = kernel.reason
    if kernel.ambiguous:
        problem["ambiguous"] = list(kernel.ambiguous)
    return problem


def load_users(settings: ServeSettings) -> Users | None:
    """The clients' users: ``--auth-file``, else htpasswd lines in the environment."""
    if settings.auth_file is not None:
        return Users(path=settings.auth_file)
    text = os.environ.get(HTPASSWD_VARIABLE)
    return Users(text=text) if text else None


def hub_sources(settings: ServeSettings,
                events: EventLog) -> tuple[dict[str, HubRepository], dict[str, HubSource]]:
    """Per kernel, the Hub repository its listings are asked of (one retry at most: the
    stale listing is served instead of waiting) and a Hub source for conversions (the
    configured retries).

    All are made here, before the first request: making one resets huggingface_hub's
    shared HTTP client (``hub.client.open_client``), which must not happen while
    another thread is using it.
    """
    from ..sources.hub import HubSource

    network = NetworkSettings.from_environment(settings.timeout, settings.retries)

    def note_for(repo: str) -> Callable[[str], None]:
        return lambda message: events.write("hub-note", repo=repo, message=message)

    listing = listing_repositories(settings.kernels, settings.repo_type, network, note_for)
    return listing, {k.repo_id: HubSource(k.repo_id, repo_type=settings.repo_type, network=network,
                                          progress=note_for(k.repo_id))
                     for k in settings.kernels}


def list_at_startup(settings: ServeSettings, events: EventLog) -> dict[str, str]:
    """Every kernel listed once, before the server starts: {repo: why} for those that
    cannot be listed at all (a wrong name, no access, a Hub that is down with no listing
    kept from an earlier run). The listings are stored in the cache, where the workers
    find them."""
    network = NetworkSettings.from_environment(settings.timeout, settings.retries)
    repositories = listing_repositories(settings.kernels, settings.repo_type, network)
    cache = WheelCache(settings.cache, settings.cache_size, events)
    with ThreadPoolExecutor(min(_LISTING_THREADS, len(settings.kernels)),
                            thread_name_prefix="kw-startup") as pool:
        catalog = Catalog(settings.kernels, HubListing(repositories), cache.listing_path,
                          settings.ttl, events, SingleFlight(pool), policy=settings.policy)
        return catalog.list_unknown(pool)


def create_app(settings: ServeSettings, events: EventLog | None = None,
               users: Users | None = None) -> ASGIApp:
    """The whole application for ``settings``; every process of ``--workers`` makes its
    own (state is per process; the cache folder and its locks are shared). ``users``:
    already loaded with :func:`load_users` (else loaded here)."""
    from huggingface_hub.utils import disable_progress_bars  # type: ignore[attr-defined]

    disable_progress_bars()  # a server's stderr is its log: JSON lines only
    json_hub_logs()
    events = events or EventLog()
    cache = WheelCache(settings.cache, settings.cache_size, events)
    listing_sources, conversion_sources = hub_sources(settings, events)
    # Their own bounded pools: a Hub that stalls holds these threads, and only these.
    listing_pool = ThreadPoolExecutor(min(_LISTING_THREADS, len(settings.kernels)),
                                      thread_name_prefix="kw-listing")
    conversion_pool = ThreadPoolExecutor(settings.conversions, thread_name_prefix="kw-conversion")
    catalog = Catalog(settings.kernels, HubListing(listing_sources), cache.listing_path,
                      settings.ttl, events, SingleFlight(listing_pool), policy=settings.policy)
    conversions = Conversions(cache, catalog, conversion_sources, events,
                              SingleFlight(conversion_pool), BackOff(), settings.policy)
    handlers = Handlers(catalog, cache, conversions, events, (listing_pool, conversion_pool))
    starlette = Starlette(routes=handlers.routes(), lifespan=handlers.lifespan,
                          exception_handlers={404: _no_such_page, 405: _no_such_page})
    starlette.router.redirect_slashes = False  # absolute, from the Host header: _slash_redirect
    app: ASGIApp = starlette
    users = users or load_users(settings)
    if users is not None:
        app = BasicAuth(app, Authenticator(users))
    return AccessLog(app, events)


def app_from_environment() -> ASGIApp:
    """The factory each ``--workers`` process calls (settings from the parent, as JSON)."""
    return create_app(ServeSettings.from_environment())
