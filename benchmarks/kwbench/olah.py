"""olah on 127.0.0.1 as the Hub: offline mode, serving local git repositories.

Each kernel repository is served both as a ``kernel`` repo (what kernel-wheels asks for
first) and as a ``model`` repo (the only kind the old ``kernels to-wheel`` knows), from
the same git repository through symlinks.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .config import KERNEL_NAME, OLAH_CLI, WORK
from .workloads import KernelRepo


@dataclass(frozen=True)
class Hub:
    endpoint: str
    log: Path

    def resolve_url(self, repo: KernelRepo, path: str) -> str:
        """The URL huggingface_hub downloads a file of a ``kernel`` repo from (the repo
        type kernel-wheels uses when both exist)."""
        return f"{self.endpoint}/kernels/{repo.repo_id}/resolve/{repo.commit}/{path}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(root: Path, port: int, mirror: Path) -> str:
    return f"""
[basic]
host = "127.0.0.1"
port = {port}
repos-path = "{root / 'cache'}"
hf-scheme = "https"
hf-netloc = "huggingface.co"
hf-lfs-netloc = "cdn-lfs.huggingface.co"
mirror-scheme = "http"
mirror-netloc = "127.0.0.1:{port}"
mirror-lfs-netloc = "127.0.0.1:{port}"
mirrors-path = ["{mirror}"]

[accessibility]
offline = true
"""


def _wait_ready(endpoint: str, probe: KernelRepo, process: subprocess.Popen[bytes], log: Path) -> None:
    # GET / answers 500 on olah: probe an API path of a repository it serves
    url = f"{endpoint}/api/models/{probe.repo_id}/revision/{probe.commit}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"olah did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.3)


@contextmanager
def serve(repos: Iterable[KernelRepo]) -> Iterator[Hub]:
    """Start olah for ``repos``; stopped on exit, also on error."""
    repos = list(repos)
    root = WORK / "olah"
    shutil.rmtree(root, ignore_errors=True)
    mirror = root / "mirror"
    for repo in repos:
        for kind in ("models", "kernels"):
            link = mirror / kind / repo.org / KERNEL_NAME
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(repo.path, target_is_directory=True)
    port = free_port()
    config = root / "olah.toml"
    config.write_text(_config(root, port, mirror))
    log = root / "olah.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(OLAH_CLI), "-c", str(config)], stdout=out,
                                   stderr=subprocess.STDOUT, cwd=root)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        _wait_ready(endpoint, repos[0], process, log)
        yield Hub(endpoint, log)
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a service manager stops a server; SIGKILL if it lingers."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
