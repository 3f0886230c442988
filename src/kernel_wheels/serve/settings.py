"""What one ``kernel-wheels serve`` runs with: the kernels, the cache, the limits.

Settings are checked when they are made, so that a typo is one line at start-up and
never an error on the first request. They travel to ``--workers`` processes as JSON in
an environment variable (uvicorn starts each worker from an import string); they never
hold a secret: the htpasswd file is named, its environment form is read in each worker.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from ..confine import read_regular
from ..errors import UsageError
from ..kernel.repo_id import is_repo_id
from ..provenance import Policy

#: How ``--workers`` processes receive the settings of their parent.
SETTINGS_VARIABLE = "KERNEL_WHEELS_SERVE_SETTINGS"
#: htpasswd lines given in the environment instead of ``--auth-file`` (no file to mount).
HTPASSWD_VARIABLE = "KERNEL_WHEELS_SERVE_HTPASSWD"
#: ``--idle-timeout`` from the environment.
IDLE_TIMEOUT_VARIABLE = "KERNEL_WHEELS_SERVE_IDLE_TIMEOUT"
DEFAULT_IDLE_TIMEOUT = 15.0
MAX_IDLE_TIMEOUT = 3600.0
DEFAULT_CONVERSIONS = 4
MAX_CONVERSIONS = 64

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class Kernel:
    """A Hub repository the server lists, and the project name its wheels carry."""

    repo_id: str
    #: The repository's name, PEP 503-normalised: the name on the index and in the wheel
    #: file names (``drbh/img2gray`` -> ``img2gray``), given to the conversion as
    #: ``--dist-name`` so that a kernel whose metadata.json says otherwise still gives
    #: the file the index promised.
    project: str

    @classmethod
    def from_repo_id(cls, repo_id: str) -> Kernel:
        if not is_repo_id(repo_id):
            raise UsageError(f"'{repo_id}' is not a Hub repository id (org/name)")
        return cls(repo_id, canonicalize_name(repo_id.split("/", 1)[1]))


UNLISTED_MODES = ("fail", "degraded")


@dataclass(frozen=True)
class ServeSettings:
    kernels: tuple[Kernel, ...]
    cache: Path
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    #: Seconds a Hub listing is trusted before it is asked again.
    ttl: float = 300.0
    #: Bytes of wheels (with their metadata files) kept on disk.
    cache_size: int = 10 << 30
    auth_file: Path | None = None
    repo_type: str | None = None
    #: Per Hub request (None: $KERNEL_WHEELS_TIMEOUT or 30 s); retries likewise.
    timeout: float | None = None
    retries: int | None = None
    #: Seconds a connection may stay idle, or spend sending its request head, before it
    #: is closed (a request being answered is never cut).
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    #: Conversions at once per worker process (their own threads).
    conversions: int = DEFAULT_CONVERSIONS
    #: A kernel that cannot be listed at start-up: "fail" (do not start) or "degraded"
    #: (serve the others; /healthz says degraded and names it).
    unlisted: str = "fail"
    #: What each conversion's provenance must prove (docs/provenance.md).
    policy: Policy = field(default_factory=Policy)

    def __post_init__(self) -> None:
        if not self.kernels:
            raise UsageError("give the kernels to serve: --kernels org/name[,org/name...] or "
                             "--kernels-file FILE")
        seen: dict[str, str] = {}
        for kernel in self.kernels:
            other = seen.setdefault(kernel.project, kernel.repo_id)
            if other != kernel.repo_id:
                raise UsageError(f"{other} and {kernel.repo_id} would both be the project "
                                 f"'{kernel.project}' on the index: serve them separately")
        if not 0 < self.port < 65536:
            raise UsageError(f"--port {self.port}: give a port from 1 to 65535")
        if self.workers < 1:
            raise UsageError(f"--workers {self.workers}: give 1 or more")
        if not self.ttl >= 0:
            raise UsageError(f"--ttl {self.ttl}: give 0 or more seconds")
        if self.cache_size <= 0:
            raise UsageError("--cache-size must be above 0")
        if not (isinstance(self.idle_timeout, (int, float)) and math.isfinite(self.idle_timeout)
                and 0 < self.idle_timeout <= MAX_IDLE_TIMEOUT):
            raise UsageError(f"--idle-timeout {self.idle_timeout}: give seconds above 0, at most "
                             f"{MAX_IDLE_TIMEOUT:g}")
        if self.unlisted not in UNLISTED_MODES:
            raise UsageError(f"--unlisted {self.unlisted}: give {' or '.join(UNLISTED_MODES)}")
        if not 1 <= self.conversions <= MAX_CONVERSIONS:
            raise UsageError(f"--conversions {self.conversions}: give 1 to {MAX_CONVERSIONS}")

    def to_json(self) -> str:
        fields = asdict(self)
        fields["cache"] = str(self.cache)
        fields["auth_file"] = str(self.auth_file) if self.auth_file else None
        fields["kernels"] = [k.repo_id for k in self.kernels]
        fields["policy"] = self.policy.to_dict()
        return json.dumps(fields)

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        fields = json.loads(text)
        fields["kernels"] = tuple(Kernel.from_repo_id(r) for r in fields["kernels"])
        fields["cache"] = Path(fields["cache"])
        fields["auth_file"] = Path(fields["auth_file"]) if fields["auth_file"] else None
        fields["policy"] = Policy.from_dict(fields["policy"])
        return cls(**fields)

    @classmethod
    def from_environment(cls) -> ServeSettings:
        text = os.environ.get(SETTINGS_VARIABLE)
        if not text:
            raise UsageError(f"{SETTINGS_VARIABLE} is not set: start the server with "
                             "kernel-wheels serve")
        return cls.from_json(text)


def idle_timeout_from_environment() -> float:
    """``$KERNEL_WHEELS_SERVE_IDLE_TIMEOUT``, else the default (15 s)."""
    text = os.environ.get(IDLE_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_IDLE_TIMEOUT
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{IDLE_TIMEOUT_VARIABLE}={text[:40]!r} is not a number of seconds") from None


def parse_kernels(given: str | None, file: Path | None) -> tuple[Kernel, ...]:
    """``--kernels a/b,c/d`` and/or ``--kernels-file FILE`` (one repository per line,
    ``#`` starts a comment)."""
    names: list[str] = []
    if given is not None:
        names += [part.strip() for part in given.split(",") if part.strip()]
        if not names:
            raise UsageError("--kernels is empty")
    if file is not None:
        try:
            text = read_regular(file, "--kernels-file", UsageError).decode("utf-8", "replace")
        except OSError as exc:
            raise UsageError(f"--kernels-file {file}: {exc.strerror or exc}") from None
        names += [line.split("#", 1)[0].strip() for line in text.splitlines()]
    unique = dict.fromkeys(n for n in names if n)
    return tuple(Kernel.from_repo_id(name) for name in unique)


def parse_size(text: str) -> int:
    """``500M``, ``10G``, ``1.5GiB``, ``123456`` (bytes) -> bytes (binary multiples)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise UsageError(f"--cache-size '{text}' is not a size like 500M or 10G")
    size = int(float(match[1]) * _UNITS[match[2].lower()])
    if size <= 0:
        raise UsageError(f"--cache-size '{text}' must be above 0")
    return size


def require_server_stack() -> None:
    """starlette and uvicorn are the ``serve`` extra, not core dependencies: a usage
    error naming the extra when either is missing."""
    import importlib.util

    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"kernel-wheels serve needs {' and '.join(missing)}: install the "
                         "serve extra: pip install 'kernel-wheels[serve] @ git+<repository URL>', "
                         "or pip install '.[serve]' in a clone (README: Install)")
