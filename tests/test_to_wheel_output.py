"""`kernel-wheels to-wheel` and its output folder (issue #9): not writable, disk full, a
different wheel in the way, two runs at once, and runs interrupted by SIGINT, SIGTERM and
SIGKILL at random points. A run places all its wheels or none: no partial or corrupt wheel
is ever visible, and the next run removes what a killed run left and succeeds.

Tests run as root here, where permission bits do not stop writes. "Not writable" is
therefore made real three ways: a read-only bind mount and a 64 KiB tmpfs in a private
mount namespace (``unshare -m``; nothing is mounted outside the test's process), the run
as user nobody (``setpriv``) on a folder it may not write, and a file-size limit
(``RLIMIT_FSIZE``; Python ignores SIGXFSZ, so writes fail with EFBIG)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_wheels.kernel.digest import digest_folder
from support.faults import (
    FaultProxy,
    one_error_line,
    partial_wheels,
    staging_folders,
    tally,
    visible_wheels,
)
from support.helpers import ROOT, run_cli

CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch214-cxx11-cu130-x86_64-linux"
KW = [sys.executable, "-m", "kernel_wheels"]
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, cpu_build: Path, cuda_build: Path) -> Path:
    """Both sample variants, each with 6 MiB of incompressible data (so that writing takes
    long enough to be interrupted in the middle), metadata.json digests updated."""
    root = tmp_path_factory.mktemp("output-source") / "img2gray"
    rng = random.Random(9)
    for built in (cpu_build, cuda_build):
        variant = root / "build" / built.name
        shutil.copytree(built, variant)
        (variant / "weights.bin").write_bytes(rng.randbytes(6 << 20))
        meta = json.loads((variant / "metadata.json").read_text())
        meta["digest"]["files"] = digest_folder(variant)
        (variant / "metadata.json").write_text(json.dumps(meta))
    os.chmod(root.parent, 0o755)  # readable by nobody (setpriv below)
    return root


@pytest.fixture(scope="module")
def reference(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The wheels of a clean run: every wheel any later run places must be one of these."""
    out = tmp_path_factory.mktemp("reference")
    run_cli("to-wheel", source, "1.0.0", "-o", out)
    return {wheel.name: wheel.read_bytes() for wheel in visible_wheels(out)}


@pytest.fixture
def recorder() -> Iterator[FaultProxy]:
    """A server that records every request (and answers 503): a Hub that must stay unasked."""
    with FaultProxy(None) as server:
        yield server


def in_namespace(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a private mount namespace: its mounts vanish with it."""
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)


def kw(*args: str | Path) -> str:
    return shlex.join([*KW, *map(str, args)])


# -- not writable -----------------------------------------------------------------------
def test_read_only_file_system(source: Path, tmp_path: Path, recorder: FaultProxy) -> None:
    """Found before any network work (a Hub source whose server records requests)."""
    out = tmp_path / "ro"
    out.mkdir()
    env = f"HF_ENDPOINT={recorder.endpoint} HF_HOME={tmp_path / 'hf'}"
    proc = in_namespace(f"mount --bind -o ro {out} {out} && env {env} {kw('to-wheel', 'drbh/img2gray', '1.1.2', '-o', out)}"
                        f"; echo rc=$?; env {env} {kw('to-wheel', 'drbh/img2gray', '1.1.2', '-o', out / 'new')}")
    assert proc.stderr.splitlines() == [
        f"kernel-wheels: error: cannot write wheels to {out}: read-only file system",
        f"kernel-wheels: error: cannot create the output folder {out / 'new'}: Read-only file system"]
    assert "rc=1" in proc.stdout and recorder.log == []
    tally("output", inputs=2, faults=2, inspected=1)


@contextlib.contextmanager
def runnable_by_nobody() -> Iterator[None]:
    """The checkout and its venv may sit below a folder only its owner may enter (e.g. a
    ``mktemp -d`` folder, mode 0700): let others pass through (x, not r) every folder on
    the way while the test runs, so that nobody can start the tool; the modes are put
    back afterwards."""
    changed: list[tuple[Path, int]] = []
    try:
        executable = Path(sys.executable)
        for folder in {*ROOT.parents, ROOT, *executable.parents, *executable.resolve().parents}:
            mode = folder.stat().st_mode
            if not mode & 0o001:
                folder.chmod(mode | 0o001)
                changed.append((folder, mode))
        yield
    finally:
        for folder, mode in changed:
            folder.chmod(mode)


def test_no_permission(tmp_path: Path, recorder: FaultProxy) -> None:
    """As user nobody: a folder it may not write, one it may not create, one it may not
    even look into (pytest's temporary folders are root's alone)."""
    shared = Path(tempfile.mkdtemp(prefix="kw-nobody-", dir="/tmp"))
    with runnable_by_nobody():
        try:
            os.chmod(shared, 0o755)
            out = shared / "locked"
            out.mkdir(mode=0o555)
            env = {**os.environ, "HF_ENDPOINT": recorder.endpoint, "HF_HOME": str(shared / "hf")}
            hidden = tmp_path / "wheels"
            for target, message in ((out, f"cannot write wheels to {out}: permission denied"),
                                    (out / "sub", f"cannot create the output folder {out / 'sub'}: Permission denied"),
                                    (hidden, f"cannot write wheels to {hidden}: Permission denied")):
                proc = subprocess.run([*NOBODY, *KW, "to-wheel", "drbh/img2gray", "1.1.2", "-o", str(target)],
                                      capture_output=True, text=True, env=env, timeout=120)
                assert one_error_line(proc) == message
            assert list(out.iterdir()) == []
        finally:
            shutil.rmtree(shared)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_cli("to-wheel", "drbh/img2gray", "1.1.2", "-o", blocker / "wheels", check=False,
                   env={"HF_ENDPOINT": recorder.endpoint, "HF_HOME": str(tmp_path / "hf")})
    assert one_error_line(proc, 2) == f"cannot write wheels to {blocker / 'wheels'}: {blocker} is a file, not a folder"
    assert recorder.log == []
    tally("output", inputs=4, faults=4, inspected=1)


# -- disk full --------------------------------------------------------------------------
def test_disk_full(source: Path, reference: dict[str, bytes], tmp_path: Path) -> None:
    """A 64 KiB file system: the first wheel does not fit. One line naming the folder (no
    staging names), nothing left, and the same run on a roomy disk then succeeds."""
    out = tmp_path / "small"
    out.mkdir()
    proc = in_namespace(f"mount -t tmpfs -o size=64k tmpfs {out} && {kw('to-wheel', source, '1.0.0', '-o', out, '-j', '1')}"
                        f"; echo rc=$?; ls -A {out}")
    first = sorted(reference)[0]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"kernel-wheels: error: cannot write {first} to {out}: No space left on device")
    assert proc.stdout.split() == ["rc=1"]  # and `ls -A` printed nothing: no wheel, no staging folder
    tally("output", inputs=1, faults=1, inspected=1)


def test_file_size_limit(source: Path, reference: dict[str, bytes], tmp_path: Path) -> None:
    """RLIMIT_FSIZE 4 MiB: the first wheel (over 6 MiB) cannot be written; -j 2 so that both
    are in progress when it fails. Nothing is placed, not even a wheel that was done."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))

    out = tmp_path / "out"
    proc = subprocess.run([*KW, "to-wheel", str(source), "1.0.0", "-o", str(out), "-j", "2"],
                          capture_output=True, text=True, preexec_fn=limit, timeout=300)
    message = one_error_line(proc)
    assert message in [f"cannot write {name} to {out}: File too large" for name in reference]
    assert not out.exists()  # the run made it, and failing, removed it: no trace
    tally("output", inputs=1, faults=1, inspected=1)


# -- a different wheel in the way -------------------------------------------------------
def test_an_existing_different_wheel(source: Path, reference: dict[str, bytes], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    cpu, cuda = sorted(reference)
    (out / cuda).write_bytes(b"someone else's wheel")
    message = one_error_line(run_cli("to-wheel", source, "1.0.0", "-o", out, check=False))
    assert message == f"{out / cuda} exists with different content (use --force to replace it)"
    # all or nothing: the CPU wheel, which had no clash, was not placed either
    assert sorted(p.name for p in out.iterdir()) == [cuda] and (out / cuda).read_bytes() == b"someone else's wheel"
    forced = json.loads(run_cli("to-wheel", source, "1.0.0", "-o", out, "--force", "--json").stdout)
    assert sorted((w["wheel"], w["status"]) for w in forced["wheels"]) == [(cpu, "written"), (cuda, "replaced")]
    again = json.loads(run_cli("to-wheel", source, "1.0.0", "-o", out, "--json").stdout)
    assert {w["status"] for w in again["wheels"]} == {"unchanged"}
    assert partial_wheels(out, reference) == [] and sorted(p.name for p in out.iterdir()) == [cpu, cuda]
    tally("output", inputs=4, faults=1, inspected=4)


# -- two runs at once -------------------------------------------------------------------
def test_two_runs_into_one_folder_at_once(source: Path, reference: dict[str, bytes], tmp_path: Path) -> None:
    """Same source: both succeed, the folder holds exactly the reference wheels. Different
    bytes under one name (another SOURCE_DATE_EPOCH): one wins whole, the other fails with
    one line; never a mix."""
    for round_ in range(4):
        out = tmp_path / f"same{round_}"
        runs = [subprocess.Popen([*KW, "to-wheel", str(source), "1.0.0", "-o", str(out)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        results = [(run.wait(timeout=300), run.communicate()[1]) for run in runs]
        assert [code for code, _ in results] == [0, 0, 0], results
        assert sorted(p.name for p in out.iterdir()) == sorted(reference)
        assert partial_wheels(out, reference) == []
    for round_ in range(3):
        out = tmp_path / f"different{round_}"
        epochs = ("1700000000", "1800000000")
        runs = [subprocess.Popen([*KW, "to-wheel", str(source), "1.0.0", "-o", str(out)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env={**os.environ, "SOURCE_DATE_EPOCH": epoch})
                for epoch in epochs]
        done = [subprocess.CompletedProcess(run.args, run.wait(timeout=300), *run.communicate()) for run in runs]
        assert sorted(proc.returncode for proc in done) == [0, 1]
        loser = next(proc for proc in done if proc.returncode)
        assert "exists with different content (use --force to replace it)" in one_error_line(loser)
        assert staging_folders(out) == [] and len(visible_wheels(out)) == 2
        assert partial_wheels(out) == []  # each wheel whole and valid ...
        stamps = set()
        for wheel in visible_wheels(out):
            with zipfile.ZipFile(wheel) as zf:
                stamps |= {info.date_time for info in zf.infolist()}
        assert len(stamps) == 1  # ... and both from the same run: never half of each
    tally("output", inputs=18, faults=3, inspected=7)


# -- SIGINT, SIGTERM, SIGKILL at random points ------------------------------------------
def test_signals_at_random_points_never_leave_a_partial_wheel(source: Path, reference: dict[str, bytes],
                                                              tmp_path: Path) -> None:
    out = tmp_path / "out"
    started = time.monotonic()
    run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "timing")
    duration = time.monotonic() - started
    rng = random.Random(int(os.environ.get("KW_SIGNAL_SEED", "20261130")))
    signals = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
    runs, stale_after_kill, cleaned_by_next, mid_work = 0, 0, 0, 0
    outcomes: dict[str, int] = {}
    # At least 60 runs, more (up to 150) until the delays have hit running work and SIGKILL
    # has left a staging folder often enough: on a loaded machine the random delays alone
    # can miss the short window in which a staging folder exists.
    i = 0
    while i < 60 or (i < 150 and (mid_work < 15 or stale_after_kill < 2)):
        sig = signals[i % 3]
        i += 1
        if rng.random() < 0.6:
            for wheel in visible_wheels(out):  # so that placing is among the interrupted steps
                wheel.unlink()
        run = subprocess.Popen([*KW, "to-wheel", str(source), "1.0.0", "-o", str(out), "-j", "2"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
        if sig is signal.SIGKILL and i % 2 == 0:
            # every other SIGKILL waits for a staging folder (a condition, not a time),
            # so that what a killed run leaves behind is always among the cases
            while run.poll() is None and not staging_folders(out):
                time.sleep(0.002)
        else:
            time.sleep(rng.uniform(0.0, duration * 1.1))
        run.send_signal(sig)
        _, stderr = run.communicate(timeout=120)
        runs += 1
        code = run.returncode
        if sig is signal.SIGINT and code == 1 and "KeyboardInterrupt" in stderr and "converting" not in stderr:
            code = -sig  # Python itself was still starting (site, imports): the tool never ran
        # 0: done before the signal; 130/143: the tool stopped and cleaned up; -N: the
        # signal's default action (Python still starting, or already finishing)
        assert code in {0, -sig, {signal.SIGINT: 130, signal.SIGTERM: 143}.get(sig, 0)}, (sig, code, stderr)
        if code in (130, 143):
            assert stderr.strip().splitlines()[-1] == \
                {130: "kernel-wheels: interrupted", 143: "kernel-wheels: terminated"}[code]
        outcome = f"{sig.name} {'completed' if code == 0 else 'interrupted'}"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if code != 0 and "converting" in stderr:
            mid_work += 1  # stopped while fetching, writing, checking or placing wheels
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)  # anything of the run's still alive
        # the invariant: every wheel in the folder is whole (byte-identical to the reference)
        assert partial_wheels(out, reference) == [], (i, sig)
        assert set(p.name for p in visible_wheels(out)) <= set(reference)
        if sig is not signal.SIGKILL:
            assert staging_folders(out) == [], (i, sig, code)  # cleaned up on the way out
        elif staging_folders(out):
            stale_after_kill += 1
            # the next run removes what the killed run left, and succeeds
            assert run_cli("to-wheel", source, "1.0.0", "-o", out).returncode == 0
            assert staging_folders(out) == [] and partial_wheels(out, reference) == []
            cleaned_by_next += 1
    final = run_cli("to-wheel", source, "1.0.0", "-o", out)
    assert final.returncode == 0 and staging_folders(out) == []
    assert sorted(p.name for p in out.iterdir()) == sorted(reference)
    assert partial_wheels(out, reference) == []
    assert runs >= 50 and stale_after_kill == cleaned_by_next
    assert mid_work >= 15 and stale_after_kill >= 2, (mid_work, outcomes)  # the delays hit running work
    print(f"signals: {runs} runs, {outcomes}, {mid_work} stopped mid-work, {stale_after_kill} staging "
          "folders left by SIGKILL, all removed by the next run, 0 partial wheels seen")
    tally("signals", inputs=runs, faults=runs, inspected=runs + cleaned_by_next + 1)
