"""Canonical source URLs: what a wheel records about where it came from.

Wheel bytes must not depend on who converted a release or how they reached it, so a
source is recorded by a canonical URL: no credentials, no local paths, one spelling per
repository (``git@github.com:org/repo.git``, ``ssh://git@github.com/org/repo`` and
``https://user:token@github.com/org/repo/`` are all ``https://github.com/org/repo``).
A Hub repository is recorded by the Hub's own URL
(:func:`kernel_wheels.kernel.repo_id.hub_url`).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_SCP = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]{2,}):(?P<path>(?!//).+)$")


def canonical_git_url(url: str) -> str | None:
    """The canonical form of a git remote URL; None for local ones (``file://``, paths)."""
    url = url.strip()
    if "://" not in url and (scp := _SCP.match(url)):
        return _join("https", scp["host"], None, scp["path"])
    parts = urlsplit(url)
    if parts.scheme in ("", "file") or not parts.hostname:
        return None
    scheme = "http" if parts.scheme == "http" else "https"  # ssh://, git:// and https:// alike
    port = parts.port if parts.scheme in ("http", "https") else None
    return _join(scheme, parts.hostname, port, parts.path)


def _join(scheme: str, host: str, port: int | None, path: str) -> str:
    path = path.strip("/").removesuffix(".git").strip("/")
    default = {"http": 80, "https": 443}[scheme]
    netloc = host.lower() + (f":{port}" if port and port != default else "")
    return f"{scheme}://{netloc}/{path}" if path else f"{scheme}://{netloc}"

