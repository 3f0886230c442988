"""The ASGI application: routes, content negotiation, authentication and access logs.

Routes::

    GET /                                  a landing page naming the indexes
    GET /healthz                           200 and a small JSON (503 when the cache is not writable)
    GET /simple/                           every project          (PEP 503 HTML / PEP 691 JSON)
    GET /simple/<project>/                 every wheel of it
    GET /<target>/simple/[<project>/]      what fits <target>     (docs/index-scheme.md)
    GET /files/<wheel>                     the wheel, converted on its first request
    GET /files/<wheel>.metadata            its METADATA (PEP 658), likewise

Everything that may wait (the Hub, a conversion, a directory scan) runs in a worker
thread; a page whose listing is fresh is answered without one (it reads at most the
small facts file of each of its wheels).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..convert.output import OutputFolder
from ..distribution import simple
from ..distribution.targets import Target, parse_target_key
from ..distribution.wheelfacts import WheelFacts
from ..errors import ListingUnavailableError, UsageError, WheelUnavailableError
from ..network import NetworkSettings
from .auth import Authenticator, BasicAuth, Users
from .cache import WheelCache
from .catalog import Catalog, HubListing, KernelListing, ServedWheel, all_wheels
from .conversions import Conversions, OpenedFile
from .logs import AccessLog, EventLog
from .negotiation import SUPPORTED, negotiate
from .pages import entries, for_target, landing_page, target_keys
from .settings import HTPASSWD_VARIABLE, ServeSettings

if TYPE_CHECKING:
    from ..sources.hub import HubSource

_CHUNK = 256 << 10
#: How long a conversion that failed in a way that would repeat (a check) is not tried
#: again; a Hub failure is never remembered.
_FAILURE_MEMORY = 60.0


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
    return PlainTextResponse(message.splitlines()[0] + "\n", status_code=status)


class Handlers:
    """The route handlers over one catalog, cache and conversion queue."""

    def __init__(self, catalog: Catalog, cache: WheelCache, conversions: Conversions,
                 events: EventLog) -> None:
        self.catalog, self.cache, self.conversions, self.events = catalog, cache, conversions, events

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

        await run_in_threadpool(prepare)
        self.events.write("ready", version=__version__)
        yield
        self.events.write("stopped")

    # -- helpers ------------------------------------------------------------------------
    async def _listings(self) -> list[KernelListing]:
        fresh = [self.catalog.fresh(k) for k in self.catalog.kernels.values()]
        if all(listing is not None for listing in fresh):
            return [listing for listing in fresh if listing is not None]
        return await run_in_threadpool(self.catalog.listings)

    @staticmethod
    def _target(request: Request) -> Target | None:
        key = request.path_params.get("target")
        return parse_target_key(key) if key is not None else None

    # -- routes -------------------------------------------------------------------------
    async def landing(self, request: Request) -> Response:
        listings = await self._listings()
        return HTMLResponse(landing_page([k.project for k in self.catalog.kernels.values()],
                                         target_keys(all_wheels(listings))))

    async def health(self, request: Request) -> Response:
        """Checks what this process needs to serve: the cache folder is writable. The
        Hub is not asked (a Hub outage is served from the cache); the last listing
        attempts are reported."""
        writable = await run_in_threadpool(self.cache.writable)
        usage = await run_in_threadpool(self.cache.usage)
        body: dict[str, Any] = {
            "status": "ok" if writable else "cache not writable",
            "version": __version__,
            **self.catalog.status(),
            "cache": {"wheels": usage.wheels, "bytes": usage.bytes, "limit": usage.limit,
                      "writable": writable},
        }
        return JSONResponse(body, status_code=200 if writable else 503)

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
        listing = self.catalog.fresh(kernel)
        if listing is None:
            try:
                listing = await run_in_threadpool(self.catalog.listing, kernel)
            except ListingUnavailableError as exc:
                return _line(502, exc.message)
        wheels = for_target(listing.wheels, target)
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

    async def file(self, request: Request) -> Response:
        filename = request.path_params["filename"]
        metadata = filename.endswith(".whl.metadata")
        wheel_name = filename.removesuffix(".metadata") if metadata else filename
        try:
            project = parse_wheel_filename(wheel_name)[0]
        except InvalidWheelFilename:
            return _line(404, f"no file {filename} here")
        wheel = await run_in_threadpool(self._find, project, wheel_name)
        if isinstance(wheel, Response):
            return wheel
        try:
            opened = await run_in_threadpool(self.conversions.open, wheel, metadata)
        except WheelUnavailableError as exc:
            return _line(502 if exc.upstream else 500, exc.message)
        not_modified = request.headers.get("if-none-match") == f'"{opened.sha256}"'
        media_type = "text/plain; charset=utf-8" if metadata else "application/octet-stream"
        return OpenedFileResponse(opened, media_type, not_modified)

    def _find(self, project: str, wheel_name: str) -> ServedWheel | Response:
        try:
            wheel = self.catalog.find(project, wheel_name)
        except ListingUnavailableError as exc:
            return _line(502, exc.message)
        return wheel if wheel is not None else _line(404, f"no file {wheel_name} here")


def load_users(settings: ServeSettings) -> Users | None:
    """The clients' users: ``--auth-file``, else htpasswd lines in the environment."""
    if settings.auth_file is not None:
        return Users(path=settings.auth_file)
    text = os.environ.get(HTPASSWD_VARIABLE)
    return Users(text=text) if text else None


def hub_sources(settings: ServeSettings,
                events: EventLog) -> tuple[dict[str, HubSource], dict[str, HubSource]]:
    """Per kernel, a Hub source for listings (one retry at most: the stale listing is
    served instead of waiting) and one for conversions (the configured retries).

    All are made here, before the first request: making one resets huggingface_hub's
    shared HTTP client (``network.configure_hub_client``), which must not happen while
    another thread is using it.
    """
    from ..sources.hub import HubSource

    network = NetworkSettings.from_environment(settings.timeout, settings.retries)
    listing = NetworkSettings(network.timeout, min(network.retries, 1), network.backoff)

    def note_for(repo: str) -> Callable[[str], None]:
        return lambda message: events.write("hub-note", repo=repo, message=message)

    def sources(settings_for: NetworkSettings) -> dict[str, HubSource]:
        return {k.repo_id: HubSource(k.repo_id, repo_type=settings.repo_type,
                                     network=settings_for, progress=note_for(k.repo_id))
                for k in settings.kernels}

    return sources(listing), sources(network)


def create_app(settings: ServeSettings, events: EventLog | None = None,
               users: Users | None = None) -> ASGIApp:
    """The whole application for ``settings``; every process of ``--workers`` makes its
    own (state is per process; the cache folder and its locks are shared). ``users``:
    already loaded with :func:`load_users` (else loaded here)."""
    from huggingface_hub.utils import disable_progress_bars  # type: ignore[attr-defined]

    disable_progress_bars()  # a server's stderr is its log: JSON lines only
    events = events or EventLog()
    cache = WheelCache(settings.cache, settings.cache_size, events)
    listing_sources, conversion_sources = hub_sources(settings, events)
    catalog = Catalog(settings.kernels, HubListing(listing_sources), cache.listings,
                      settings.ttl, events)
    conversions = Conversions(cache, catalog, conversion_sources, events, _FAILURE_MEMORY)
    handlers = Handlers(catalog, cache, conversions, events)
    app: ASGIApp = Starlette(routes=handlers.routes(), lifespan=handlers.lifespan)
    users = users or load_users(settings)
    if users is not None:
        app = BasicAuth(app, Authenticator(users))
    return AccessLog(app, events)


def app_from_environment() -> ASGIApp:
    """The factory each ``--workers`` process calls (settings from the parent, as JSON)."""
    return create_app(ServeSettings.from_environment())
