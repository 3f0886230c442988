"""Fixtures of the mirror tests: kernels with several releases served by the local olah
Hub, and moto's S3 server on 127.0.0.1 as the bucket.

The kernels are pure Python (``torch-universal``, ``torch-cpu``, ``torch-cuda`` builds,
and Linux builds for two targets whose package has no binary: no compiler needed, and
the index gets target pages), in git repositories whose commits have fixed dates and authors, so the
same release always converts to the same bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .helpers import free_port, olah_server, stop, wait_for

BASE_DATE = 1767225600  # 2026-01-01T00:00:00Z
#: repository -> [(version, variants)], oldest first.
ARCH = ("torch213-cxx11-cpu-x86_64-linux", "torch27-cxx11-cu128-x86_64-linux")
KERNELS = {
    "mirror-org/alpha": [("1.0.0", ("torch-universal", "torch-cpu", "torch-cuda", *ARCH)),
                         ("1.1.0", ("torch-universal", "torch-cpu", "torch-cuda", *ARCH)),
                         ("2.0.0", ("torch-universal", "torch-cpu", "torch-cuda", "torch-rocm", *ARCH))],
    "mirror-org/beta": [("0.1.0", ("torch-universal",)), ("0.2.0", ("torch-universal", "torch-cpu"))],
    "mirror-org/gamma": [("3.0.0", ("torch-universal", "torch-cuda", ARCH[0]))],
}
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
          "AWS_DEFAULT_REGION": "us-east-1"}


def git(repo: Path, *args: str, step: int = 0) -> str:
    date = f"{BASE_DATE + step * 86400} +0000"
    env = {**os.environ, "GIT_AUTHOR_NAME": "mirror fixture", "GIT_AUTHOR_EMAIL": "f@example.invalid",
           "GIT_COMMITTER_NAME": "mirror fixture", "GIT_COMMITTER_EMAIL": "f@example.invalid",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=env,
                          capture_output=True, text=True).stdout.strip()


def write_release(repo: Path, version: str, variants: tuple[str, ...], step: int) -> str:
    """Commit build/<variant>/ for ``version`` and tag it v<version>; returns the commit."""
    shutil.rmtree(repo / "build", ignore_errors=True)
    package = repo.name.replace("-", "_")
    for variant in variants:
        folder = repo / "build" / variant
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text(f'VERSION = "{version}"\nVARIANT = "{variant}"\n')
        (folder / package).mkdir()
        (folder / package / "__init__.py").write_text("from .. import *\n")
    (repo / "README.md").write_text(f"---\nlicense: apache-2.0\n---\n# {repo.name}\n\nRelease {version}.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", f"Release {version}", step=step)
    git(repo, "tag", "-f", f"v{version}", step=step)
    return git(repo, "rev-parse", "HEAD")


def make_repos(root: Path) -> Path:
    """``root/kernels/<org>/<name>``: one git repository per kernel of KERNELS."""
    for repo_id, releases in KERNELS.items():
        repo = root / "kernels" / repo_id
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "config", "commit.gpgsign", "false")
        for step, (version, variants) in enumerate(releases):
            write_release(repo, version, variants, step)
    return root


@contextmanager
def mirror_hub(root: Path) -> Iterator[tuple[str, Path]]:
    """olah serving the kernels; (endpoint, the folder of git repositories)."""
    repos = make_repos(root / "mirror")
    with olah_server(root, repos, "kernels/mirror-org/alpha") as server:
        yield server.endpoint, repos


@dataclass
class S3Server:
    endpoint: str

    def env(self) -> dict[str, str]:
        return {**S3_ENV, "AWS_ENDPOINT_URL": self.endpoint}

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def snapshot(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object under ``prefix``: key (without the prefix) -> bytes."""
        client = self.client()
        found = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", ()):
                key = item["Key"]
                found[key[len(prefix):].lstrip("/")] = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        return found


@contextmanager
def s3_server(root: Path) -> Iterator[S3Server]:
    """moto's S3 API in server mode on 127.0.0.1 (a real HTTP server, the same boto3
    client code a user's bucket gets)."""
    port = free_port()
    log = root / "moto.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1",
                                    "-p", str(port)], stdout=out, stderr=subprocess.STDOUT, cwd=root,
                                   env={**os.environ, **S3_ENV})
    try:
        wait_for(f"http://127.0.0.1:{port}/moto-api/", process, log, timeout=60)
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        stop(process)


def folder_snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}
