"""``kernel-wheels serve``: a package index that fronts the Hub and converts on demand.

pip and uv speak the Simple Repository API to it; it speaks huggingface_hub to the Hub
(or a mirror, HF_ENDPOINT). Index pages come from the Hub's listing alone (release
tags, build folders, the wheel contract's file names); a wheel is converted by
``to_wheels`` on its first request, checked, cached by commit and served with the same
bytes from then on.

- ``settings``: what a server runs with, checked up front;
- ``catalog``: the Hub listing (releases, variants, planned file names), with a TTL and
  served stale when the Hub is away;
- ``conversions``: one conversion per wheel, even with requests arriving at once in
  several worker processes;
- ``cache``: the wheels on disk by commit, bounded, least recently used evicted first;
- ``pages``: index entries through the static site's code (``index.simple``,
  ``index.targets``);
- ``negotiation``, ``auth``, ``logs``: PEP 691 forms, basic authentication, JSON logs;
- ``app``: the Starlette application; ``server``: uvicorn, workers, shutdown.

Why Starlette and uvicorn: an index server is a handful of GET routes that mostly wait
(on the Hub, on a conversion, on the disk), so an ASGI stack that waits without a thread
per connection and hands blocking work to a thread pool fits; Starlette is the small,
typed, widely deployed core of that stack (FastAPI is built on it) with no framework
to learn beyond routes and responses, and uvicorn is its reference server, with the
production parts this needs already done and maintained: worker processes with a
supervisor that replaces dead ones, graceful shutdown on SIGTERM, keep-alive, proxy
headers. Both are pure Python wheels with few dependencies (anyio, h11, click).
"""
