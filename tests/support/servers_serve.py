"""Helpers for the serve tests: `kernel-wheels serve` as a real subprocess on 127.0.0.1,
its JSON-lines log, an olah instance of our own (a Hub we can stop and add tags to),
and plain HTTP reads that trust nothing of kernel-wheels' own client."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .helpers import Olah, free_port, olah_server, stop, wait_for

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass
class Serve:
    base: str  # http://127.0.0.1:PORT/
    process: subprocess.Popen[bytes]
    log: Path
    cache: Path

    def events(self, kind: str | None = None) -> list[dict[str, object]]:
        """Every JSON line of the server's log so far (of one kind)."""
        found = []
        complete = self.log.read_text().rpartition("\n")[0]  # a line being written waits
        for line in complete.splitlines():
            record = json.loads(line)  # every line must be JSON
            if kind is None or record["event"] == kind:
                found.append(record)
        return found

    def conversions(self, filename: str) -> int:
        return sum(e["wheel"] == filename for e in self.events("conversion-started"))


@contextmanager
def serve(kernels: str, cache: Path, env: dict[str, str], *args: str) -> Iterator[Serve]:
    """`kernel-wheels serve --kernels KERNELS --cache CACHE ARGS` until the block ends
    (SIGTERM, as a service manager stops it)."""
    port = free_port()
    cache.mkdir(parents=True, exist_ok=True)
    log = cache.parent / f"serve-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kernel_wheels", "serve", "--kernels", kernels, "--cache",
             str(cache), "--host", "127.0.0.1", "--port", str(port), *args],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})
    server = Serve(f"http://127.0.0.1:{port}/", process, log, cache)
    try:
        wait_for(server.base + "healthz", process, log, timeout=60)
        yield server
    finally:
        stop(process)


def get(url: str, accept: str | None = None, auth: tuple[str, str] | None = None,
        method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request; HTTP errors are answers too."""
    request = urllib.request.Request(url, method=method)
    if accept:
        request.add_header("Accept", accept)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


# --- a Hub of our own ---------------------------------------------------------------------


@contextmanager
def own_olah(root: Path, kernel_repo: Path) -> Iterator[tuple[Olah, Path]]:
    """olah (offline mode) serving a copy of the kernel repository as drbh/img2gray;
    yields the server and the copy, to add tags to."""
    repos = root / "mirror"
    copy = repos / "kernels" / "drbh" / "img2gray"
    shutil.copytree(kernel_repo, copy)
    with olah_server(root, repos, "kernels/drbh/img2gray") as server:
        yield server, copy


def add_tag(repo: Path, tag: str, ref: str = "v1") -> None:
    """An annotated release tag on ``ref`` of the repository olah serves."""
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "tag",
                    "-a", tag, "-m", tag, ref], check=True, capture_output=True)
