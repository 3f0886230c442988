"""Shared test helpers: running the real command, making venvs, reading wheels."""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .gray import reference_gray  # noqa: F401  (re-exported for the tests)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample-kernel"
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"


#: Secret canaries (issue #30): every CLI run of the tests has these in its environment,
#: unless the test sets its own value, and must never show them (stdout, stderr) or hand
#: them to a child's argv. Only secrets the tool does not itself use: HF_TOKEN and
#: TWINE_PASSWORD change what it does (its messages say "set HF_TOKEN", publish finds a
#: password), so they are checked where a test sets them (any value of 8 characters or
#: more), not set for every test.
CANARIES = {name: f"kwcanary-{name.lower().replace('_', '-')}-5e3f9a1c" for name in (
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "CI_JOB_TOKEN", "NPM_TOKEN",
    "KW_CANARY_SECRET")}
#: Where a test's own secrets travel: their values are held to the same rules.
SECRET_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "TWINE_PASSWORD", "PIP_PASSWORD", *CANARIES)
AUDITED = Path(__file__).with_name("audited.py")
#: The audit hook also checks a compiler's environment (builds run compilers with an
#: allow-listed environment: building/environment.py).
CHECK_COMPILER_ENV = True


def cli_secrets(env: dict[str, str]) -> list[str]:
    """The canaries and test-given secrets of a run's environment ``env``."""
    return sorted({env[name] for name in SECRET_VARIABLES if len(env.get(name) or "") >= 8})


def run_cli(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
            check: bool = True, prefix: list[str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``kernel-wheels`` as a user would (a new process), with the secret canaries in
    its environment and an audit hook watching its children (``audited.py``); HOME and
    TMPDIR are the test's own folders (``KW_TEST_HOME``, ``KW_TEST_TMP``, set by conftest)
    unless the test gives its own, the XDG folders stay the user's (caches, pip's
    configuration). Asserts that no secret showed."""
    given = {**os.environ, **(env or {})}
    full = {**CANARIES, **given}
    if "KW_TEST_HOME" in os.environ and "HOME" not in (env or {}):
        home = os.path.expanduser("~")
        full["HOME"] = os.environ["KW_TEST_HOME"]
        # The user's caches, configuration and toolchains stay where they are (rustup, for
        # one, would otherwise set itself up afresh in the new HOME).
        for name, default in (("XDG_CACHE_HOME", ".cache"), ("XDG_CONFIG_HOME", ".config"),
                              ("XDG_DATA_HOME", ".local/share"), ("XDG_STATE_HOME", ".local/state"),
                              ("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")):
            full.setdefault(name, os.path.join(home, default))
    if os.environ.get("KW_TEST_TMP") and "TMPDIR" not in (env or {}):
        full["TMPDIR"] = os.environ["KW_TEST_TMP"]
    full.pop("KW_TEST_HOME", None)
    full.pop("KW_TEST_TMP", None)
    secrets = cli_secrets(full)
    audit = None
    if secrets:
        fd, audit = tempfile.mkstemp(prefix="kw-audit-", suffix=".log")
        os.close(fd)
        full["KW_AUDIT_LOG"], full["KW_AUDIT_SECRETS"] = audit, json.dumps(secrets)
    cmd = [*(prefix or []), sys.executable, str(AUDITED), *map(str, args)]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)
        if proc.returncode < 0 and os.environ.get("KW_TEST_TMP") == full.get("TMPDIR"):
            # Killed by a signal (SIGKILL on purpose, in the crash tests): nothing can remove
            # its temporary folders, which conftest would otherwise count as left behind.
            for left in Path(full["TMPDIR"]).glob("kernel-wheels-*"):
                shutil.rmtree(left, ignore_errors=True)
        found = Path(audit).read_text().splitlines() if audit else []
    finally:
        if audit:
            os.unlink(audit)
    if not CHECK_COMPILER_ENV:
        found = [line for line in found if "environment" not in line]
    assert not found, f"{args}: " + "; ".join(found)
    shown = [name for name in SECRET_VARIABLES if full.get(name) in secrets
             and full[name] in proc.stdout + proc.stderr]
    assert not shown, f"{args}: the value of {', '.join(shown)} was printed:\n{proc.stdout}\n{proc.stderr}"
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def one_line_error(proc: subprocess.CompletedProcess[str], *expected: str, status: int | None = None,
                   starts: str | None = None) -> str:
    """The run failed (with exit ``status`` when given) with exactly one error line and no
    traceback; the line holds each of ``expected`` (and starts with ``starts`` after the
    ``kernel-wheels: error:`` prefix, when given). Returns that line."""
    if status is None:
        assert proc.returncode not in (0, None), proc.stdout + proc.stderr
    else:
        assert proc.returncode == status, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kernel-wheels: error:")]
    assert len(errors) == 1, proc.stderr
    if starts is not None:
        assert errors[0].startswith(f"kernel-wheels: error: {starts}"), proc.stderr
    for text in expected:
        assert text in errors[0], proc.stderr
    return errors[0]


def cuda_python() -> Path:
    """The CUDA torch venv's Python (torch 2.14.1 / CUDA 13.0), or KW_CUDA_PYTHON."""
    path = Path(os.environ.get("KW_CUDA_PYTHON", ROOT / ".venv-cuda" / "bin" / "python"))
    if not path.exists():
        import pytest  # here: the kernels venv imports this module (reference_gray) without pytest

        pytest.fail(f"no CUDA torch venv at {path}: run scripts/bootstrap.sh --cuda "
                    "(or set KW_CUDA_PYTHON)")
    return path


def torch_wheel(cache: Path) -> Path:
    """The local torch 2.13.0 CPU wheel (pip finds it through this machine's config)."""
    found = sorted(cache.glob("torch-2.13.0*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "torch==2.13.0", "-d", str(cache)], check=True, capture_output=True)
        found = sorted(cache.glob("torch-2.13.0*.whl"))
    return found[0]


def make_venv(path: Path, torch: Path | None = None) -> Path:
    """A fresh venv (with pip); torch installed from ``torch`` if given. Returns its python."""
    subprocess.run([UV, "venv", "-q", "--seed", "--python", sys.executable, str(path)],
                   check=True, capture_output=True)
    python = path / "bin" / "python"
    if torch is not None:
        subprocess.run([UV, "pip", "install", "-q", "--python", str(python), str(torch)],
                       check=True, capture_output=True)
    return python


def make_kernels_venv(path: Path, cache: Path) -> Path:
    """A fresh venv with the local torch 2.13.0 (CPU) and the `kernels` library of this
    venv's version (``cache``: where the torch wheel is kept). Returns its python."""
    import importlib.metadata

    python = make_venv(path, torch=torch_wheel(cache))
    proc = subprocess.run([UV, "pip", "install", "-q", "--python", str(python),
                           f"kernels=={importlib.metadata.version('kernels')}"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    torch = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True).stdout.strip()
    assert torch == "2.13.0+cpu"  # kernels did not bring another torch
    return python


def read_member(wheel: Path, suffix: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(suffix))
        return zf.read(name).decode()


def _ephemeral_ports() -> range:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


_PORTS = itertools.count(random.Random(os.getpid()).randrange(0, 1000))


def free_port() -> int:
    """A port for a test server, free now and unlikely to be taken before it binds.

    Not ``bind(0)``: that draws from the kernel's ephemeral range, which every outgoing
    connection of pip, uv and the other workers also draws from, so the port could be
    taken between the probe and the server's bind. Ports come from below that range
    instead, each pytest-xdist worker walking a slice of its own."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slot = int(worker) % 8 if worker.isdigit() else 0
    low = max(1024, min(_ephemeral_ports().start, 33000) - 8 * 2000)
    for _ in range(2000):
        port = low + slot * 2000 + next(_PORTS) % 2000
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (another run on this machine): the next one
            return port
    raise RuntimeError("no free port for a test server")


def wait_for(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 90) -> None:
    """Until ``url`` answers 200; the server's log tail if it exits or never answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:  # refused, reset, or an HTTP error answer while it starts
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"server for {url} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a service manager stops a server; SIGKILL if it lingers."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Olah:
    def __init__(self, root: Path, port: int, process: subprocess.Popen[bytes], log: Path) -> None:
        self.root, self.port, self.process, self.log = root, port, process, log
        self.endpoint = f"http://127.0.0.1:{port}"

    def requests(self) -> int:
        """Every request served so far."""
        return sum(' HTTP/1.1"' in line for line in self.log.read_text().splitlines())

    def downloads(self) -> int:
        """File downloads (resolve requests) served so far."""
        return sum('"GET ' in line and "/resolve/" in line for line in self.log.read_text().splitlines())


@contextmanager
def olah_server(root: Path, mirror: Path, probe_repo: str) -> Iterator[Olah]:
    """olah on 127.0.0.1 in offline mode, serving the git repositories under ``mirror``
    (``mirror/<kernels|models>/<org>/<name>``) until the block ends. ``probe_repo``
    (``kernels/org/name``) is asked for until it answers: olah's ``GET /`` answers 500."""
    port = free_port()
    config = root / "olah.toml"
    config.write_text(f"""
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
""")
    log = root / "olah.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).parent / "olah-cli"), "-c", str(config)],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=root)
    server = Olah(root, port, process, log)
    try:
        wait_for(f"{server.endpoint}/api/{probe_repo}/revision/main", process, log, timeout=60)
        yield server
    finally:
        stop(process)  # a no-op for a server a test has already stopped
