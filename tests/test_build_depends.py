"""CUTLASS by exact version (issue #23): a version PyPI does not carry comes from the
project's tagged source archive, downloaded once into the build cache from the base URL
KERNEL_WHEELS_CUTLASS_URL names (a mirror) and checked against a pinned digest.

The archive server is a real HTTP server on 127.0.0.1 serving archives made here. Their
digests are not the real CUTLASS 3.9.2's, so each test names its own digest table with
KERNEL_WHEELS_CUTLASS_DIGESTS (overridden, and the build log says so); the pinned table
itself is checked against kernel-builder's pins below.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from kernel_wheels import data
from kernel_wheels.building.source_archive import nar_hash
from support.helpers import run_cli
from support.http_server import LoopbackServer

KERNELS = Path(__file__).parent / "kernels"
VARIANT = "torch-stable-abi211-cpu-x86_64-linux"
VERSION_H = b"#pragma once\n#define CUTLASS_MAJOR 3\n#define CUTLASS_MINOR 9\n#define CUTLASS_PATCH 2\n"
MARK_H = b"#pragma once\n#define KW_ARCHIVE_MARK 4242\n"


def archive(members: dict[str, bytes | tuple[str, str]], top: str = "cutlass-3.9.2") -> bytes:
    """A .tar.gz like GitHub's: one top folder; a tuple value is (link kind, target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        folder = tarfile.TarInfo(top)
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        for name, content in members.items():
            info = tarfile.TarInfo(name if name.startswith(("/", "..")) else f"{top}/{name}")
            if isinstance(content, tuple):
                info.type = tarfile.SYMTYPE if content[0] == "symlink" else tarfile.LNKTYPE
                info.linkname = content[1]
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


GOOD = {"include/cutlass/version.h": VERSION_H,
        "tools/util/include/cutlass/util/kw_archive_mark.h": MARK_H,
        "examples/README.md": b"not kept\n"}


class ArchiveServer:
    """Serves ``files`` (path -> bytes) on 127.0.0.1 and counts the requests."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.requests.append(self.path)
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = LoopbackServer(Handler).start()
        self.url = self.httpd.url("/mirror")

    def stop(self) -> None:
        self.httpd.stop()


@pytest.fixture
def server() -> Iterator[ArchiveServer]:
    running = ArchiveServer()
    yield running
    running.stop()


def digests(tmp_path: Path, **pins: str) -> Path:
    table = tmp_path / "digests.json"
    table.write_text(json.dumps({"3.9.2": pins}))
    return table


def build(tmp_path: Path, server: ArchiveServer, table: Path, out: str = "out",
          **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli("build", KERNELS / "kw-cutlass", "-o", tmp_path / out, check=False,
                   env={"KERNEL_WHEELS_CACHE": str(tmp_path / "cache"), "CUTLASS_SRC_DIR": "",
                        "KERNEL_WHEELS_CUTLASS_URL": server.url, "KERNEL_WHEELS_RETRIES": "0",
                        "KERNEL_WHEELS_CUTLASS_DIGESTS": str(table), **env})


def cache_entries(tmp_path: Path) -> list[str]:
    folder = tmp_path / "cache" / "build-depends"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_version_pypi_lacks_comes_from_the_archive_once(server: ArchiveServer, tmp_path: Path) -> None:
    body = archive(GOOD)
    server.files["/mirror/v3.9.2.tar.gz"] = body
    table = digests(tmp_path, sha256=hashlib.sha256(body).hexdigest())
    proc = build(tmp_path, server, table)
    assert proc.returncode == 0, proc.stderr
    assert f"CUTLASS 3.9.2: digests from KERNEL_WHEELS_CUTLASS_DIGESTS={table}, not kernel-wheels' " \
           "pinned table" in proc.stderr
    assert f"cutlass_3_9: CUTLASS 3.9.2 from {server.url}/v3.9.2.tar.gz (sha256 checked)" in proc.stderr
    program = ("import sys\nfrom pathlib import Path\nfrom kernels import get_local_kernel\n"
               "k = get_local_kernel(Path(sys.argv[1]))\nprint(k.cutlass_version(), k.archive_mark())")
    ran = subprocess.run([sys.executable, "-c", program, str(tmp_path / "out")], capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["30902", "4242"]  # both include folders of the archive
    [entry] = cache_entries(tmp_path)
    kept = sorted(p.relative_to(tmp_path / "cache" / "build-depends" / entry).as_posix()
                  for p in (tmp_path / "cache" / "build-depends" / entry).rglob("*") if p.is_file())
    assert kept == ["include/cutlass/version.h", "tools/util/include/cutlass/util/kw_archive_mark.h"]
    again = build(tmp_path, server, table, out="again")
    assert again.returncode == 0, again.stderr
    assert server.requests == ["/mirror/v3.9.2.tar.gz"]  # downloaded once


def test_the_trees_nix_hash_is_checked_where_no_archive_digest_is_pinned(
        server: ArchiveServer, tmp_path: Path) -> None:
    """kernel-builder pins CUTLASS by the Nix hash of the unpacked tree (4.5.2 has no
    other pin): a matching tree is used, a different one refused."""
    body = archive(GOOD)
    server.files["/mirror/v3.9.2.tar.gz"] = body
    reference = tmp_path / "reference"
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        tar.extractall(reference, filter="data")
    wrong = build(tmp_path, server, digests(tmp_path, nar="sha256-" + "A" * 43 + "="))
    assert wrong.returncode == 1
    assert (f"kernel-wheels: error: [kernel.cutlass_cpu] depends on cutlass_3_9 (CUTLASS 3.9.2): "
            f"{server.url}/v3.9.2.tar.gz unpacks to a tree with Nix hash "
            f"{nar_hash(reference / 'cutlass-3.9.2')}, not the pinned sha256-{'A' * 43}=: refusing to "
            "build with it") in wrong.stderr
    assert cache_entries(tmp_path) == []
    right = build(tmp_path, server, digests(tmp_path, nar=nar_hash(reference / "cutlass-3.9.2")))
    assert right.returncode == 0, right.stderr
    assert "(Nix hash checked)" in right.stderr


@pytest.mark.parametrize("members, message", [
    ({**GOOD, "../../escape.h": b"x"},
     "'../../escape.h' leads outside its folder"),
    ({**GOOD, "/etc/kw-absolute.h": b"x"},
     "'/etc/kw-absolute.h' is an absolute path"),
    ({**GOOD, "include/cutlass/evil.h": ("symlink", "../../../../etc/passwd")},
     "'include/cutlass/evil.h' links to '../../../../etc/passwd', outside the archive"),
    ({**GOOD, "include/cutlass/hard.h": ("hardlink", "/etc/passwd")},
     "'cutlass-3.9.2/include/cutlass/hard.h' is a hard link; refusing the archive"),
], ids=["dot-dot", "absolute", "symlink-out", "hardlink"])
def test_a_hostile_archive_with_the_right_digest_is_still_refused(
        server: ArchiveServer, tmp_path: Path, members: dict[str, bytes | tuple[str, str]],
        message: str) -> None:
    body = archive(members)
    server.files["/mirror/v3.9.2.tar.gz"] = body
    proc = build(tmp_path, server, digests(tmp_path, sha256=hashlib.sha256(body).hexdigest()))
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.startswith("kernel-wheels: error:")]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert cache_entries(tmp_path) == []  # nothing kept, no temporary folder left
    assert not Path("/etc/kw-absolute.h").exists()
    assert not (tmp_path / "cache" / "escape.h").exists() and not (tmp_path / "escape.h").exists()


@pytest.mark.parametrize("change, message", [
    ("digest", "has sha256 {found}, not the pinned {pinned}: refusing to build with it"),
    ("missing", "could not download {url} (HTTP 404)"),
    ("garbage", "is not a readable tar archive"),
], ids=["wrong-digest", "not-on-the-mirror", "not-an-archive"])
def test_a_wrong_or_missing_archive_is_one_line_and_leaves_nothing(
        server: ArchiveServer, tmp_path: Path, change: str, message: str) -> None:
    body = archive(GOOD) if change != "garbage" else b"<html>not a tarball</html>"
    if change != "missing":
        server.files["/mirror/v3.9.2.tar.gz"] = body
    found = hashlib.sha256(body).hexdigest()
    pinned = "0" * 64 if change == "digest" else found
    proc = build(tmp_path, server, digests(tmp_path, sha256=pinned))
    assert proc.returncode == 1
    expected = message.format(found=found, pinned=pinned, url=f"{server.url}/v3.9.2.tar.gz")
    lines = [line for line in proc.stderr.splitlines() if line.startswith("kernel-wheels: error:")]
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert lines[0].startswith("kernel-wheels: error: [kernel.cutlass_cpu] depends on cutlass_3_9 "
                               "(CUTLASS 3.9.2): ")
    assert cache_entries(tmp_path) == []


def test_cutlass_src_dir_still_wins(server: ArchiveServer, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    for name, content in GOOD.items():
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_bytes(content.replace(b"4242", b"77"))
    proc = build(tmp_path, server, digests(tmp_path, sha256="0" * 64), CUTLASS_SRC_DIR=str(checkout))
    assert proc.returncode == 0, proc.stderr
    assert f"cutlass_3_9: CUTLASS_SRC_DIR={checkout}" in proc.stderr
    assert server.requests == []


def test_nar_hash_matches_nix() -> None:
    """The known answer of `nix hash path` for a file holding "hello" (no newline)."""
    assert base64.b64decode(nar_hash_of_bytes(b"hello").removeprefix("sha256-")) == base64.b64decode(
        "CkMIecJm+LV/QJKg+TXPP6zUi7zN5XYNR0jKQFFx6Wk=")


def nar_hash_of_bytes(content: bytes) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "hello"
        path.write_bytes(content)
        return nar_hash(path)


def test_every_cutlass_version_has_a_pinned_archive_digest() -> None:
    """kernel-builder's pins (nix-builder/pkgs/cutlass/default.nix), copied exactly."""
    kernel_builder = {
        "cutlass_2_10": ("2.10.0", "sha256-e2SwXNNwjl/1fV64b+mOJvwGDYeO1LFcqZGbNten37U="),
        "cutlass_3_5": ("3.5.1", "sha256-sTGYN+bjtEqQ7Ootr/wvx3P9f8MCDSSj3qyCWjfdLEA="),
        "cutlass_3_6": ("3.6.0", "sha256-FbMVqR4eZyum5w4Dj5qJgBPOS66sTem/qKZjYIK/7sg="),
        "cutlass_3_8": ("3.8.0", "sha256-oIzlbKRdOh6gp6nRZ8udLSqleBFoFtgM7liCBlHZLOk="),
        "cutlass_3_9": ("3.9.2", "sha256-teziPNA9csYvhkG5t2ht8W8x5+1YGGbHm8VKx4JoxgI="),
        "cutlass_4_0": ("4.0.0", "sha256-HJY+Go1viPkSVZPEs/NyMtYJzas4mMLiIZF3kNX+WgA="),
        "cutlass_4_4": ("4.4.2", "sha256-0q9Ad0Z6E/rO2PdM4uQc8H0E0qs9uKc3reHepiHhjEc="),
        "cutlass_4_5": ("4.5.2", "sha256-5SMEfoqB2QXRfH5wBwTKKjez0x2zhR8T8EA0bqPMqwM="),
    }
    table = data.load("build_depends")
    for name, (version, nar) in kernel_builder.items():
        assert table[name]["version"] == version
        assert table[name]["archive"] == {**table[name]["archive"], "tag": f"v{version}", "nar": nar}
