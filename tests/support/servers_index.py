"""Helpers for the distribution tests: real index servers on 127.0.0.1 (pypiserver with
htpasswd, devpi-server, a plain static file server), quick valid wheels, a site
validator that trusts nothing but the files, and fingerprints that show whether torch
or an index changed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

from .helpers import free_port, stop, wait_for

BIN = Path(sys.executable).parent

# pip without this machine's configuration (find-links, extra indexes): only the index
# under test may answer.
ISOLATED_PIP = {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": "",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
                "UV_NO_CONFIG": "1", "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}


def pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "TWINE_"))}
    return {**env, **ISOLATED_PIP}


# --- servers ----------------------------------------------------------------------------


@dataclass
class IndexServer:
    kind: str
    upload_url: str
    simple_url: str
    username: str
    password: str
    process: subprocess.Popen[bytes]

    def listing(self, project: str = "img2gray") -> dict[str, str]:
        """{file name: sha256} of a project, read from the Simple API's HTML."""
        return simple_listing(self.simple_url + project + "/")


@contextmanager
def pypiserver(root: Path) -> Iterator[IndexServer]:
    """pypiserver with htpasswd authentication for uploads; no fallback to PyPI."""
    import warnings

    packages = root / "packages"
    packages.mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # passlib imports 'crypt'
        from passlib.apache import HtpasswdFile

        htpasswd = HtpasswdFile(str(root / "htpasswd"), new=True)
        htpasswd.set_password("uploader", "pypi-secret-7781")
        htpasswd.save()
    port = free_port()
    log = root / "pypiserver.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(BIN / "pypi-server"), "run", "-p", str(port), "-i",
                                    "127.0.0.1", "-P", str(root / "htpasswd"), "-a", "update",
                                    "--disable-fallback", str(packages)],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/"
        wait_for(base + "simple/", process, log)
        yield IndexServer("pypiserver", base, base + "simple/", "uploader", "pypi-secret-7781",
                          process)
    finally:
        stop(process)


@contextmanager
def devpi(root: Path) -> Iterator[IndexServer]:
    """devpi-server (offline) with its own user ``kw`` and non-volatile index ``kw/dev``,
    made with the devpi client."""
    server_dir, client_dir = root / "server", root / "client"
    subprocess.run([str(BIN / "devpi-init"), "--serverdir", str(server_dir), "--root-passwd",
                    "root-secret-1"], check=True, capture_output=True)
    port = free_port()
    log = root / "devpi.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(BIN / "devpi-server"), "--serverdir", str(server_dir),
                                    "--host", "127.0.0.1", "--port", str(port), "--offline-mode"],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/"
        wait_for(base + "+api", process, log)
        devpi_cli = [str(BIN / "devpi"), "--clientdir", str(client_dir)]
        for args in (["use", base], ["user", "-c", "kw", "password=devpi-secret-4410"],
                     ["login", "kw", "--password", "devpi-secret-4410"],
                     ["index", "-c", "dev", "bases=", "volatile=False"]):
            subprocess.run([*devpi_cli, *args], check=True, capture_output=True)
        yield IndexServer("devpi", base + "kw/dev/", base + "kw/dev/+simple/", "kw",
                          "devpi-secret-4410", process)
    finally:
        stop(process)


@contextmanager
def static_server(folder: Path) -> Iterator[str]:
    """``python -m http.server`` on 127.0.0.1 over ``folder``; yields its base URL."""
    port = free_port()
    log = folder.parent / f"http-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "http.server", "-d", str(folder),
                                    "-b", "127.0.0.1", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base, timeout=2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log.read_text()) from None
                time.sleep(0.1)
        yield base
    finally:
        stop(process)


# --- reading indexes independently of kernel-wheels' own client ---------------------------


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))


def anchors(html: str) -> list[dict[str, str | None]]:
    parser = _Anchors()
    parser.feed(html)
    return parser.anchors


def simple_listing(url: str) -> dict[str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            html = response.read().decode()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {}
        raise
    result = {}
    for anchor in anchors(html):
        href = anchor["href"] or ""
        name = unquote(href.split("#")[0].rsplit("/", 1)[-1])
        result[name] = href.partition("#sha256=")[2]
    return result


# --- sites ------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def validate_site(site: Path) -> dict[str, set[str]]:
    """Every page of every index parses; every link points at a file that exists with
    the sha256 the link claims, and at a .metadata file with the hash it claims; every
    project a root page lists has a page; the JSON form lists the same files.
    Returns {index folder: set of listed file names}."""
    listed: dict[str, set[str]] = {}
    roots = [p.parent for p in site.glob("simple/index.html")] + \
        [p.parent for p in site.glob("*/simple/index.html")]
    assert roots, f"no index in {site}"
    hashes: dict[Path, str] = {}

    def digest(path: Path) -> str:
        if path not in hashes:
            hashes[path] = sha256(path)
        return hashes[path]

    for root in roots:
        names: set[str] = set()
        for anchor in anchors((root / "index.html").read_text()):
            project_dir = root / (anchor["href"] or "").rstrip("/")
            assert (project_dir / "index.html").is_file(), f"{project_dir} listed but missing"
        for page in root.glob("*/index.html"):
            links = anchors(page.read_text())
            page_json = json.loads((page.parent / "index.json").read_text())
            assert sorted(f["filename"] for f in page_json["files"]) == \
                sorted(unquote((a["href"] or "").split("#")[0].rsplit("/", 1)[-1]) for a in links)
            for anchor in links:
                href = anchor["href"] or ""
                url, _, fragment = href.partition("#")
                target = (page.parent / unquote(url)).resolve()
                assert target.is_file(), f"{page} links to missing {target}"
                assert fragment == f"sha256={digest(target)}", f"{page}: bad hash for {target}"
                metadata = Path(f"{target}.metadata")
                assert metadata.is_file(), f"{metadata} missing"
                assert anchor["data-core-metadata"] == f"sha256={digest(metadata)}"
                names.add(target.name)
        listed[str(root.relative_to(site))] = names
    return listed


def tree_snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """{relative path: (inode, mtime_ns, sha256)} of every file under ``folder``."""
    result = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            stat = path.stat()
            result[str(path.relative_to(folder))] = (stat.st_ino, stat.st_mtime_ns, sha256(path))
    return result


def make_noarch_wheels(out: Path, projects: int, versions: int, start: int = 0,
                       name: str = "kernel") -> list[Path]:
    """Small valid ``torch-universal`` wheels ``<name>-NNNNN`` x versions 1.0.V, written
    with kernel-wheels' own writer (each passes ``kernel-wheels check``)."""
    from kernel_wheels.kernel.variants import parse_variant
    from kernel_wheels.wheel.metadata import DescribedKernel, metadata_text, wheel_text
    from kernel_wheels.wheel.plan import TagOptions, plan_wheel
    from kernel_wheels.wheel.writer import Member, write_wheel

    out.mkdir(parents=True, exist_ok=True)
    variant = parse_variant("torch-universal")
    kernel = DescribedKernel("test kernel", None, "Apache-2.0", (), None)
    paths = []
    for number in range(start, start + projects):
        project = f"{name}-{number:05d}"
        module = project.replace("-", "_")
        for version in range(versions):
            plan = plan_wheel(variant, project, f"1.0.{version}", TagOptions())
            members = [
                Member(f"{module}/__init__.py", content=f"VERSION = '1.0.{version}'\n".encode()),
                Member(f"{plan.dist_info}/METADATA", content=metadata_text(plan, kernel).encode()),
                Member(f"{plan.dist_info}/WHEEL", content=wheel_text(plan).encode()),
            ]
            path = out / plan.filename
            write_wheel(path, members, plan.dist_info, 0)
            paths.append(path)
    return paths


def corrupt_copy(wheel: Path, out: Path) -> Path:
    """The same wheel with one member's bytes changed (its RECORD hash no longer
    matches); same name, so it also differs from the original under that name."""
    import zipfile

    out.mkdir(parents=True, exist_ok=True)
    target = out / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("__init__.py"):
                data += b"\n# tampered\n"
            dst.writestr(info, data)
    return target


# --- environments -----------------------------------------------------------------------


def torch_fingerprint(python: Path) -> str:
    """sha256 over torch's version, its RECORD, and (path, size, mtime, inode) of every
    file RECORD lists: a reinstall or an upgrade changes it."""
    code = ("import importlib.metadata as m, hashlib, os\n"
            "d = m.distribution('torch')\n"
            "h = hashlib.sha256(d.version.encode() + d.read_text('RECORD').encode())\n"
            "for f in sorted(d.files):\n"
            "    p = d.locate_file(f)\n"
            "    if os.path.exists(p):\n"
            "        s = os.stat(p); h.update(f'{f} {s.st_size} {s.st_mtime_ns} {s.st_ino}'.encode())\n"
            "print(h.hexdigest())\n")
    return subprocess.run([str(python), "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip()


RUN_OP = """
import json, sys, warnings
warnings.filterwarnings("ignore")
import importlib.metadata, torch, img2gray
image = torch.randint(0, 256, (257, 311, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(7))
gray = img2gray.img2gray(image)
f = image.float()
reference = ((0.21 * f[..., 0] + 0.72 * f[..., 1]) + 0.07 * f[..., 2]).to(image.dtype)
print(json.dumps({"equal": bool(torch.equal(gray, reference)),
                  "version": importlib.metadata.version("img2gray"), "file": img2gray.__file__}))
"""


def run_op(python: Path) -> dict[str, object]:
    """Import img2gray in ``python`` and compare its op with the float32 reference
    (the same formula as helpers.reference_gray)."""
    proc = subprocess.run([str(python), "-c", RUN_OP], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def uninstall(python: Path, name: str = "img2gray") -> None:
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", name], check=True,
                   capture_output=True, env=pip_env())


def pip_pick(index_url: str, requirement: str, *, platform: str | None = None,
             python_version: str = "3.11") -> str | None:
    """The file pip would install (``pip install --dry-run --report``, no deps), for
    this interpreter or for another platform; None when pip finds none."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
           "--no-deps", "--ignore-installed", "--index-url", index_url, requirement]
    if platform:
        cmd += ["--platform", platform, "--only-binary=:all:", "--python-version", python_version]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=pip_env())
    if proc.returncode != 0:
        assert "No matching distribution" in proc.stderr or "from versions: none" in proc.stderr, \
            proc.stderr
        return None
    report = json.loads(proc.stdout)
    url = report["install"][0]["download_info"]["url"]
    return unquote(url.rsplit("/", 1)[-1])
