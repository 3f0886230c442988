"""``kernel-wheels serve``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .common import Commands, add_command, add_source_options, network, policy, stderr

if TYPE_CHECKING:
    from ..serve.settings import ServeSettings

# The command line stays light: the server's modules are imported when it runs.
DEFAULT_TTL = 300.0
DEFAULT_CACHE_SIZE = "10G"

EPILOG = """\
examples:
  kernel-wheels serve --kernels drbh/img2gray
  pip install img2gray --index-url http://127.0.0.1:8000/torch213-cxx11-cpu/simple
  kernel-wheels install img2gray --index-url http://127.0.0.1:8000/simple/

  kernel-wheels serve --kernels-file kernels.txt --host 0.0.0.0 --port 8080 --workers 4 \\
      --cache /var/cache/kernel-wheels --cache-size 50G --ttl 600 --auth-file /etc/kernel-wheels/htpasswd
  pip install img2gray --index-url https://ci:PASSWORD@wheels.internal/torch27-cxx11-cu128/simple

  HF_ENDPOINT=https://hub-mirror.internal HF_TOKEN=hf_... kernel-wheels serve --kernels org/private-kernel
  HF_HUB_OFFLINE=1 kernel-wheels serve --kernels drbh/img2gray     # from the HF cache only

Indexes: /simple/ lists every wheel (for kernel-wheels install); /<target>/simple/ lists
what a machine of that target should get (torch213-cxx11-cpu, torch27-cxx11-cu128, ...:
see docs/index-scheme.md), so that plain pip and uv pick the right build. Every release
tag vX.Y.Z is a version. A wheel is converted on its first request (like to-wheel REPO
X.Y.Z --variant V), checked, cached by commit and served with the same bytes after.
/healthz answers 200 with a small JSON. Logs are JSON lines on stderr, one per request.
Authentication: --auth-file, or htpasswd lines in $KERNEL_WHEELS_SERVE_HTPASSWD.
Connections idle, or slow to send their request, for --idle-timeout seconds are closed.
See docs/serve.md.
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    sv = add_command(
        commands, "serve", help="run a package index that converts Hub kernels into wheels on demand",
        description="Serve Hub kernels as a Simple-API package index (PEP 503/691/658) "
                    "for pip and uv: pages from the Hub's listing, each wheel converted on its "
                    "first request, checked and cached.", epilog=EPILOG)
    kernels = sv.add_argument_group("kernels (one of them, or both)")
    kernels.add_argument("--kernels", metavar="REPO[,REPO...]",
                         help="Hub repositories to serve, e.g. drbh/img2gray,org/other")
    kernels.add_argument("--kernels-file", type=Path, metavar="FILE",
                         help="a file with one Hub repository per line (# comments)")
    sv.add_argument("--cache", type=Path, metavar="DIR",
                    help="where wheels and listings are kept (default: "
                         "$KERNEL_WHEELS_CACHE/serve, else ~/.cache/kernel-wheels/serve)")
    sv.add_argument("--cache-size", default=DEFAULT_CACHE_SIZE, metavar="SIZE",
                    help="disk for cached wheels, e.g. 500M or 50G; least recently used wheels "
                         f"are removed beyond it (default: {DEFAULT_CACHE_SIZE})")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    sv.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    sv.add_argument("--workers", type=int, default=1, metavar="N",
                    help="worker processes (default: 1); they share the cache")
    sv.add_argument("--ttl", type=float, default=DEFAULT_TTL, metavar="SECONDS",
                    help="how long a Hub listing is trusted before it is asked again; a new "
                         f"tag appears after at most this long (default: {DEFAULT_TTL:g})")
    sv.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                    help="close a connection that stays idle, or takes longer to send its request "
                         "head, than this (default: $KERNEL_WHEELS_SERVE_IDLE_TIMEOUT, else 15)")
    sv.add_argument("--conversions", type=int, default=4, metavar="N",
                    help="wheels converted at once per worker process, in threads of their own "
                         "(default: 4); more requests wait without holding a thread")
    sv.add_argument("--auth-file", type=Path, metavar="HTPASSWD",
                    help="require HTTP basic authentication of clients, against this htpasswd "
                         "file (apr1, sha256/512-crypt, bcrypt with the bcrypt package)")
    sv.add_argument("--unlisted", choices=["fail", "degraded"], default="fail",
                    help="a kernel that cannot be listed at start-up: fail (do not start, the "
                         "default) or degraded (serve the others; /healthz says degraded)")
    add_source_options(sv, policy=True)
    return sv


def run(args: argparse.Namespace) -> int:
    from ..cache import cache_dir
    from ..serve.settings import (
        ServeSettings,
        idle_timeout_from_environment,
        parse_kernels,
        parse_size,
        require_server_stack,
    )

    require_server_stack()
    network(args)  # --timeout and --retries are checked now, not in the first conversion
    settings = ServeSettings(
        kernels=parse_kernels(args.kernels, args.kernels_file),
        cache=(args.cache or cache_dir("serve")).expanduser().resolve(),
        host=args.host, port=args.port, workers=args.workers, ttl=args.ttl,
        cache_size=parse_size(args.cache_size), auth_file=args.auth_file,
        repo_type=args.repo_type, timeout=args.timeout, retries=args.retries,
        idle_timeout=args.idle_timeout if args.idle_timeout is not None else idle_timeout_from_environment(),
        conversions=args.conversions, unlisted=args.unlisted, policy=policy(args))
    from ..serve.server import run_server

    run_server(settings, started=_tell_a_person(settings))
    return 0


def _tell_a_person(settings: ServeSettings) -> Callable[[str], None] | None:
    """On a terminal, one human line beside the JSON log: the URLs to give pip and
    install. A log collector (stderr not a terminal) gets the JSON lines only."""
    import sys

    if not sys.stderr.isatty():
        return None

    def say(base: str) -> None:
        local = base.replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:")
        names = ", ".join(k.repo_id for k in settings.kernels)
        # A Hub repository's wheels are named after the repository (to-wheel's rule).
        first = settings.kernels[0].project if settings.kernels else "NAME"
        stderr(f"serving {names} at {local}: kernel-wheels install {first} -i {local}simple/ ; "
               f"pip install {first} --index-url {local}TARGET/simple/ (a machine's target, e.g. "
               "torch213-cxx11-cpu: docs/index-scheme.md); Ctrl-C stops")

    return say
