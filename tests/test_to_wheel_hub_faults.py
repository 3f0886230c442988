"""`kernel-wheels to-wheel` against Hub faults on a real loopback server (issue #9): olah
serves drbh/img2gray, and a fault-injecting HTTP proxy (tests/support/faults.py: real
sockets, real HTTP) sits between it and kernel-wheels. Each fault is either retried with
backoff until it clears (the wheel is then byte-identical to a clean run's) or ends in one
error line and exit 1 after a bounded number of tries (counted: requests and retries, never
seconds), with no wheel and no staging folder left.
HF_TOKEN is set to a recognisable fake in every run and never appears in any output or
wheel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import FaultProxy, one_error_line, staging_folders, tally, visible_wheels
from support.helpers import Olah, run_cli

CPU = "torch213-cxx11-cpu-x86_64-linux"
WHEEL = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
TOKEN = "hf_kwFakeTokenReliability0123456789abcdef"
SO = r"resolve/[0-9a-f]{40}/build/" + CPU + r"/_img2gray_cpu_[0-9a-f]+\.abi3\.so$"
REFS = r"^GET /api/kernels/drbh/img2gray/refs"
TREE = r"^GET /api/kernels/drbh/img2gray/tree/[0-9a-f]{40}/build\?"


@pytest.fixture
def proxy(olah: Olah) -> Iterator[FaultProxy]:
    with FaultProxy(olah.endpoint) as server:
        yield server
    tally("hub", faults=server.faults_injected)


@pytest.fixture(scope="module")
def clean_bytes(olah: Olah, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The CPU wheel of v1.1.2 converted straight from olah, no proxy, no faults."""
    home = tmp_path_factory.mktemp("clean")
    env = {"HF_ENDPOINT": olah.endpoint, "HF_HOME": str(home / "hf"),
           "KERNEL_WHEELS_CACHE": str(home / "kw"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    run_cli("to-wheel", "drbh/img2gray", "1.1.2", "--variant", CPU, "-o", home / "out", env=env)
    return (home / "out" / WHEEL).read_bytes()


def convert(proxy: FaultProxy, hub_env: dict[str, str], out: Path, *args: str,
            timeout: str = "2", retries: str = "1") -> tuple[subprocess.CompletedProcess[str], float]:
    """The run and its seconds: a wait the run must make (a Retry-After, a timeout) is a
    lower bound on them, which a busy machine only raises; no test bounds them above."""
    env = {**hub_env, "HF_ENDPOINT": proxy.endpoint, "HF_TOKEN": TOKEN}
    started = time.monotonic()
    proc = run_cli("to-wheel", "drbh/img2gray", "1.1.2", "--variant", CPU, "-o", out,
                   "--timeout", timeout, "--retries", retries, *args, env=env, check=False)
    elapsed = time.monotonic() - started
    assert TOKEN not in proc.stdout + proc.stderr
    for wheel in visible_wheels(out):
        assert TOKEN.encode() not in wheel.read_bytes()
    assert staging_folders(out) == []
    tally("hub", inputs=1, inspected=1)
    return proc, elapsed


def retries(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The run's "trying again in N s (i/n)" warnings: the retry schedule it computed."""
    return [line for line in proc.stderr.splitlines() if "; trying again in " in line]


def test_every_request_carries_the_token_and_no_output_shows_it(proxy: FaultProxy, hub_env: dict[str, str],
                                                                 clean_bytes: bytes, tmp_path: Path) -> None:
    """The scans in convert() mean something: the token is really in the process (sent
    on every request), yet absent from stdout, stderr and the wheel."""
    proc, _ = convert(proxy, hub_env, tmp_path / "out", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / WHEEL).read_bytes() == clean_bytes
    hub_calls = [auth for (line, _), auth in zip(proxy.log, proxy.authorization, strict=True)
                 if "agent-harnesses" not in line]
    assert hub_calls and all(auth == f"Bearer {TOKEN}" for auth in hub_calls)


HF_CACHE_READER = """
import json, sys
from huggingface_hub import scan_cache_dir, snapshot_download
root = snapshot_download("drbh/img2gray", repo_type="kernel", revision="v1.1.2", allow_patterns=[sys.argv[1]])
(repo,) = scan_cache_dir().repos
print(json.dumps({"root": root, "warnings": [str(w) for w in scan_cache_dir().warnings],
                  "files": sorted(f.file_name for r in repo.revisions for f in r.files)}))
"""


def test_each_file_is_one_get_into_the_hf_cache(proxy: FaultProxy, hub_env: dict[str, str], clean_bytes: bytes,
                                                tmp_path: Path) -> None:
    """A variant's files come with one GET each, no HEAD (the tree listing told their size
    and id), and land in the HF cache as huggingface_hub lays it out: huggingface_hub
    itself, offline, resolves the tag and finds them there."""
    proc, _ = convert(proxy, hub_env, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    files = proxy.requests(rf"/resolve/[0-9a-f]{{40}}/build/{CPU}/")
    assert len(files) >= 3 and all(line.startswith("GET ") for line in files), files
    assert len(set(files)) == len(files)
    reader = subprocess.run([sys.executable, "-c", HF_CACHE_READER, f"build/{CPU}/*"],
                            env={**os.environ, **hub_env, "HF_HUB_OFFLINE": "1"},
                            capture_output=True, text=True, check=True)
    found = json.loads(reader.stdout)
    assert found["warnings"] == []
    assert Path(found["root"]).parent.parent == Path(hub_env["HF_HOME"]) / "hub" / "kernels--drbh--img2gray"
    assert len([f for f in found["files"] if not f.endswith(".md")]) == len(files)


def test_two_runs_at_once_share_one_hf_cache(olah: Olah, hub_env: dict[str, str], clean_bytes: bytes,
                                            tmp_path: Path) -> None:
    """Two conversions of the same release at the same moment, one HF cache: each blob is
    written once under its lock, both runs give the clean bytes, and the cache holds no
    half-written file."""
    runs = [subprocess.Popen([sys.executable, "-m", "kernel_wheels", "to-wheel", "drbh/img2gray", "1.1.2",
                              "--variant", CPU, "-o", str(tmp_path / f"out{i}")],
                             env={**os.environ, **hub_env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for i in range(2)]
    for run in runs:
        _, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
    for i in range(2):
        assert (tmp_path / f"out{i}" / WHEEL).read_bytes() == clean_bytes
    cache = Path(hub_env["HF_HOME"]) / "hub" / "kernels--drbh--img2gray"
    assert not [p for p in cache.rglob("*") if p.name.endswith((".incomplete", ".link", ".tmp"))]
    assert all(link.resolve().parent == cache / "blobs" for link in (cache / "snapshots").rglob("*")
               if link.is_symlink())


def test_a_file_redirected_to_another_host_is_fetched_without_the_token(
        olah: Olah, proxy: FaultProxy, hub_env: dict[str, str], clean_bytes: bytes, tmp_path: Path) -> None:
    """The Hub answers an LFS file with a redirect to its CDN: the download follows it,
    and the token goes to the Hub only, never to the other host (another port of
    127.0.0.1 is another origin)."""
    with FaultProxy(olah.endpoint) as cdn:
        proxy.add(r"^GET .*" + SO, "status", status=302, headers={"Location": cdn.endpoint + "{path}"})
        proc, _ = convert(proxy, hub_env, tmp_path / "out")
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "out" / WHEEL).read_bytes() == clean_bytes
        assert proxy.faults_injected == 1 and len(cdn.requests(SO)) == 1
        assert cdn.authorization == [""]
        assert proxy.authorization[[line for line, _ in proxy.log].index(proxy.requests(SO)[0])] \
            == f"Bearer {TOKEN}"


def test_hub_down_then_back(proxy: FaultProxy, hub_env: dict[str, str], clean_bytes: bytes,
                            tmp_path: Path) -> None:
    """Nothing listening (connection refused), then the server comes back on the same port
    during the backoff: the run succeeds with the clean bytes."""
    proxy.down()
    env = {**hub_env, "HF_ENDPOINT": proxy.endpoint, "HF_TOKEN": TOKEN}
    out = tmp_path / "out"
    run = subprocess.Popen([sys.executable, "-m", "kernel_wheels", "to-wheel", "drbh/img2gray", "1.1.2",
                            "--variant", CPU, "-o", str(out), "--timeout", "2", "--retries", "4"],
                           env={**os.environ, **env}, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        # Up again once the first try has been refused (the run says so), not after a
        # fixed delay that a loaded machine may not have reached the first try in.
        assert run.stderr is not None
        seen = []
        for line in run.stderr:
            seen.append(line)
            if "Connection refused; trying again" in line:
                break
        proxy.up()
        stdout, rest = run.communicate(timeout=60)
        stderr = "".join(seen) + rest
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, stderr
    assert "warning: listing refs: [Errno 111] Connection refused; trying again in 0.5 s (1/4)" in stderr
    assert (out / WHEEL).read_bytes() == clean_bytes and TOKEN not in stdout + stderr
    tally("hub", faults=stderr.count("Connection refused"))


def test_hub_down_for_good(proxy: FaultProxy, hub_env: dict[str, str], tmp_path: Path) -> None:
    proxy.down()
    proc, _ = convert(proxy, hub_env, tmp_path / "out")
    assert one_error_line(proc) == (
        f"listing refs: no usable answer from {proxy.endpoint} after 2 tries ([Errno 111] Connection "
        "refused); the timeout is 2 s (--timeout, KERNEL_WHEELS_TIMEOUT)")
    # bounded: one retry, half a second after the first refusal, then it gave up
    assert retries(proc) == ["warning: listing refs: [Errno 111] Connection refused; trying again in 0.5 s (1/1)"]
    assert visible_wheels(tmp_path / "out") == []
    tally("hub", faults=2)


# (rule pattern, fault, status, headers, retries, timeout, the error after "kernel-wheels: error: ",
#  requests the fault must have caught: each one but the last was retried once, after the wait
#  the run announced)
PERSISTENT = {
    "reset on listing refs": (REFS, "reset", 0, {}, "1", "2",
                              "listing refs: no usable answer from {E} after 2 tries ([Errno 104] Connection reset "
                              "by peer); the timeout is 2 s (--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
    "killed mid-download": (r"^GET .*" + SO, "cut", 0, {}, "1", "2",
                            "downloading build/" + CPU + ": no usable answer from {E} after 2 tries ([Errno 104] "
                            "Connection reset by peer); the timeout is 2 s (--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
    "401": (REFS, "status", 401, {}, "1", "2",
            "{E} refused access to drbh/img2gray (HTTP 401): the token in HF_TOKEN (not shown) lacks access", 1),
    "403 on a file": (r"^GET .*" + SO, "status", 403, {}, "1", "2",
                      "{E} refused access to drbh/img2gray (HTTP 403): the token in HF_TOKEN (not shown) lacks "
                      "access", 1),
    "404": (REFS, "status", 404, {}, "1", "2", "listing refs failed: HTTP 404 from {E}", 1),
    "429 with Retry-After": (REFS, "status", 429, {"Retry-After": "1"}, "1", "2",
                             "listing refs: no usable answer from {E} after 2 tries (HTTP 429); the timeout is 2 s "
                             "(--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
    "429 asking for an hour": (REFS, "status", 429, {"Retry-After": "3600"}, "1", "2",
                               "listing refs: {E} is rate limiting (HTTP 429) and asks to wait 3600 s; try again "
                               "later", 1),
    "500": (TREE, "status", 500, {}, "1", "2",
            "listing build/: no usable answer from {E} after 2 tries (HTTP 500); the timeout is 2 s "
            "(--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
    "truncated file": (r"^GET .*" + SO, "truncate", 0, {}, "1", "2",
                       "downloading build/" + CPU + ": no usable answer from {E} after 2 tries (peer closed "
                       "connection without sending complete message body (received {HALF} bytes, expected {SIZE})); "
                       "the timeout is 2 s (--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
    # The tree listing tells each file's size and git blob id: a transfer that does not
    # match is retried, then refused, and never enters the HF cache.
    "a server lying consistently about a file": (SO, "short", 0, {}, "1", "2",
                                                 "downloading build/" + CPU + ": no usable answer from {E} after "
                                                 "2 tries ({SO_NAME}: received {HALF} bytes, the listing says "
                                                 "{SIZE}); the timeout is 2 s (--timeout, KERNEL_WHEELS_TIMEOUT)",
                                                 2),
    "a byte changed in transit": (r"^GET .*" + SO, "flip", 0, {}, "1", "2",
                                  "downloading build/" + CPU + ": no usable answer from {E} after 2 tries "
                                  "({SO_NAME}: the bytes received differ from the listing's git blob id); the "
                                  "timeout is 2 s (--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
    "stalled answer": (REFS, "stall", 0, {}, "1", "2",
                       "listing refs: no usable answer from {E} after 2 tries (timed out); the timeout is 2 s "
                       "(--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
    "stalled file answer": (r"^GET .*" + SO, "stall", 0, {}, "1", "2",
                              "downloading build/" + CPU + ": no usable answer from {E} after 2 tries (timed out); "
                              "the timeout is 2 s (--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
    "stalled mid-body": (r"^GET .*" + SO, "stall_body", 0, {}, "1", "2",
                         "downloading build/" + CPU + ": no usable answer from {E} after 2 tries (timed out); the "
                         "timeout is 2 s (--timeout, KERNEL_WHEELS_TIMEOUT)", 2),
}


def _so_facts(cpu_build: Path) -> dict[str, object]:
    """The sample's .so as the messages name it (its name carries the source's hash)."""
    so = next(cpu_build.glob("*.so"))
    size = so.stat().st_size
    return {"SO_NAME": so.name, "SIZE": size, "HALF": size // 2}


@pytest.mark.parametrize("case", sorted(PERSISTENT))
def test_persistent_fault_ends_in_one_line_and_no_wheel(proxy: FaultProxy, hub_env: dict[str, str],
                                                        clean_bytes: bytes, tmp_path: Path, case: str,
                                                        cpu_build: Path) -> None:
    pattern, fault, status, headers, tries, timeout, message, caught = PERSISTENT[case]
    message = message.format(E="{E}", **_so_facts(cpu_build))  # {E} is filled below
    proxy.add(pattern, fault, status=status, headers=headers)
    out = tmp_path / "out"
    proc, elapsed = convert(proxy, hub_env, out, timeout=timeout, retries=tries)
    assert one_error_line(proc) == message.format(E=proxy.endpoint)
    if "Retry-After" in headers and headers["Retry-After"] == "1":
        assert elapsed >= 1 and "warning: listing refs: HTTP 429; trying again in 1 s (1/1)" in proc.stderr
    assert len([w for _, w in proxy.log if w != "passed"]) == caught, proxy.log
    # the end came after a bounded schedule: a retry per caught request but the last (none
    # for an answer no retry can change, such as a wait of an hour), each announced
    schedule = retries(proc)
    assert len(schedule) == caught - 1 and all(line.endswith(" s (1/1)") for line in schedule), proc.stderr
    assert not out.exists()  # the run made it, and failing, removed it: no trace
    # The same HF cache (with whatever the failed run left in it), the fault gone: the next
    # run gives exactly the clean bytes, never a wheel of partial or altered data.
    proxy.clear()
    again, _ = convert(proxy, hub_env, out)
    assert again.returncode == 0, again.stderr
    assert (out / WHEEL).read_bytes() == clean_bytes


# (rule pattern, fault, status, headers, the warning our retry prints, the least seconds the
#  run must have waited)
TRANSIENT = {
    "reset once": (REFS, "reset", 0, {}, "listing refs: [Errno 104] Connection reset by peer; trying again in 0.5 s (1/1)", 0),
    "killed mid-download once": (r"^GET .*" + SO, "cut", 0, {},
                                 f"downloading build/{CPU}: [Errno 104] Connection reset by peer; trying again in 0.5 s (1/1)", 0),
    "truncated once": (r"^GET .*" + SO, "truncate", 0, {},
                       f"downloading build/{CPU}: peer closed connection without sending complete message body "
                       "(received {HALF} bytes, expected {SIZE}); trying again in 0.5 s (1/1)", 0),
    "a byte changed once": (r"^GET .*" + SO, "flip", 0, {},
                            f"downloading build/{CPU}: {{SO_NAME}}: the bytes received differ from the listing's "
                            "git blob id; trying again in 0.5 s (1/1)", 0),
    "500 once": (r"^GET .*" + SO, "status", 500, {}, f"downloading build/{CPU}: HTTP 500; trying again in 0.5 s (1/1)", 0),
    "429 with Retry-After 2 once": (REFS, "status", 429, {"Retry-After": "2"},
                                    "listing refs: HTTP 429; trying again in 2 s (1/1)", 2),
    "stalled once": (TREE, "stall", 0, {}, "listing build/: timed out; trying again in 0.5 s (1/1)", 2),
    "stalled mid-body once": (r"^GET .*" + SO, "stall_body", 0, {},
                              f"downloading build/{CPU}: timed out; trying again in 0.5 s (1/1)", 2),
}


@pytest.mark.parametrize("case", sorted(TRANSIENT))
def test_fault_that_clears_gives_the_clean_bytes(proxy: FaultProxy, hub_env: dict[str, str], clean_bytes: bytes,
                                                 tmp_path: Path, case: str, cpu_build: Path) -> None:
    pattern, fault, status, headers, warning, waited = TRANSIENT[case]
    warning = warning.format(**_so_facts(cpu_build))
    proxy.add(pattern, fault, times=1, status=status, headers=headers)
    proc, elapsed = convert(proxy, hub_env, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert proxy.faults_injected == 1
    assert f"warning: {warning}" in proc.stderr.splitlines(), proc.stderr
    assert elapsed >= waited
    assert (tmp_path / "out" / WHEEL).read_bytes() == clean_bytes


def test_auth_error_with_a_token_never_shows_it(proxy: FaultProxy, hub_env: dict[str, str], tmp_path: Path) -> None:
    proxy.add(REFS, "status", status=403)
    proc, _ = convert(proxy, hub_env, tmp_path / "out", "--json")
    assert one_error_line(proc) == (
        f"{proxy.endpoint} refused access to drbh/img2gray (HTTP 403): the token in HF_TOKEN (not shown) lacks access")
    assert '"type": "AuthenticationError"' in proc.stdout and TOKEN not in proc.stdout


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_download_stops_it_at_once(proxy: FaultProxy, hub_env: dict[str, str], clean_bytes: bytes,
                                                     tmp_path: Path, signum: int) -> None:
    """Ctrl-C or SIGTERM while a binary downloads (and the wheel writer reads it as it
    arrives): the transfer is abandoned within a piece, not finished first. The extension
    (85 kB) comes 1 kB per 200 ms here, 17 s in all; the run must leave the transfer
    (the proxy sees the connection closed) before its last byte, leave no wheel, no
    staging folder and no half-written blob, and the next run gives the clean bytes."""
    proxy.add(r"^GET .*" + SO, "slow", every=0.2)
    out, home = tmp_path / "out", Path(hub_env["HF_HOME"])
    env = {**os.environ, **hub_env, "HF_ENDPOINT": proxy.endpoint, "HF_TOKEN": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "kernel_wheels", "to-wheel", "drbh/img2gray", "1.1.2", "--variant", CPU,
         "-o", str(out), "--timeout", "10"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        # the transfer is under way: its file is open and a few pieces have gone out
        while not (list(home.rglob("*.incomplete")) and proxy.slow_sent >= 4096):
            assert process.poll() is None, "the run ended before the download was under way"
            time.sleep(0.02)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)  # a guard against a hang, not a measure
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    expected = {signal.SIGINT: (130, "kernel-wheels: interrupted"), signal.SIGTERM: (143, "kernel-wheels: terminated")}
    assert (process.returncode, stderr.strip().splitlines()[-1]) == expected[signum], stderr
    assert "Traceback" not in stderr and TOKEN not in stderr
    # The proxy notices the closed connection at its next piece: the transfer was left, not
    # finished (a run that waited for the rest of the body would have received all of it).
    while not proxy.slow_transfers:
        time.sleep(0.02)
    (transfer,) = proxy.slow_transfers
    assert transfer.how == "client left" and transfer.sent < transfer.total, transfer
    assert not out.exists() and staging_folders(tmp_path) == []
    assert list(home.rglob("*.incomplete")) == []
    tally("hub", inputs=1, faults=1, inspected=1)
    proxy.clear()
    again, _ = convert(proxy, hub_env, out)
    assert again.returncode == 0, again.stderr
    assert (out / WHEEL).read_bytes() == clean_bytes
