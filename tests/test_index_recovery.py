"""`kernel-wheels index` killed at any point, then run again, gives the same site as a
run never interrupted (byte for byte, every file and page); a refused run leaves
nothing new behind; names from wheels and links planted in the site never lead a
write outside it. The local user is the attacker here (or the power cut)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from support.helpers import run_cli
from support.servers_index import corrupt_copy, make_noarch_wheels, validate_site

STATE = Path(".kernel-wheels") / "state.json"


def snapshot(site: Path) -> dict[str, str]:
    """{relative path: sha256} of every file a web server would serve (the state
    folder is the tool's cache, not part of the site)."""
    return {str(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(site.rglob("*"))
            if p.is_file() and ".kernel-wheels" not in p.relative_to(site).parts}


def start_index(inputs: Path, site: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kernel_wheels", "index", str(inputs), "-o", str(site),
                             "-j", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_when(process: subprocess.Popen[bytes], condition: Callable[[], bool], deadline: float = 120) -> bool:
    """SIGKILL ``process`` as soon as ``condition`` holds; False when the run ended
    first (the point was not caught)."""
    end = time.monotonic() + deadline
    while process.poll() is None and time.monotonic() < end:
        if condition():
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True
        time.sleep(0.0005)
    process.wait()
    return False


def _state(site: Path) -> dict[str, object] | None:
    try:
        return json.loads((site / STATE).read_text())
    except (OSError, ValueError):
        return None


def _count(site: Path, pattern: str) -> int:
    return sum(1 for _ in site.glob(pattern))


# The points a run passes, in order, each a condition on the site as it is on disk.
KILL_POINTS: dict[str, Callable[[Path], bool]] = {
    "lock taken": lambda site: (site / ".kernel-wheels" / "lock").exists(),
    "checking": lambda site: _count(site, ".kernel-wheels/staging/incoming/*") > 0,
    "first wheel placed": lambda site: _count(site, "files/*.whl") > 0,
    "half the wheels placed": lambda site: _count(site, "files/*.whl") >= 100,
    "state written mid-run": lambda site: (s := _state(site)) is not None and s["renderer"] == "",
    "first project page": lambda site: _count(site, "simple/*/index.html") > 0,
    "first target page": lambda site: _count(site, "torch2*/simple/*/index.html") > 0,
    "root pages": lambda site: (site / "simple" / "index.json").exists(),
    "landing page": lambda site: (site / "index.html").exists(),
    "state written at the end": lambda site: (s := _state(site)) is not None and s["renderer"] != "",
}


@pytest.fixture(scope="module")
def batch(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample kernel's CPU and CUDA wheels (two target indexes) and 200 small
    universal wheels: more than the 64 after which a run writes its state mid-way."""
    folder = tmp_path_factory.mktemp("recovery-batch")
    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", folder)
    make_noarch_wheels(folder, 200, 1, name="recovery")
    return folder


@pytest.fixture(scope="module")
def reference(batch: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], float]:
    """The site of a run never interrupted, and how long that run took."""
    site = tmp_path_factory.mktemp("reference") / "site"
    started = time.monotonic()
    run_cli("index", batch, "-o", site, "-j", "2")
    took = time.monotonic() - started
    validate_site(site)
    assert sorted(p.parent.name for p in site.glob("*/simple")) == ["torch213-cxx11-cpu", "torch214-cxx11-cu130"]
    return snapshot(site), took


def _finish_and_compare(batch: Path, site: Path, reference: dict[str, str]) -> None:
    rerun = run_cli("index", batch, "-o", site, "-j", "2")
    assert "2 target indexes" in rerun.stderr, rerun.stderr
    assert snapshot(site) == reference
    assert not (site / ".kernel-wheels" / "staging").exists()


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_run_killed_at_a_point_is_finished_by_the_next(batch: Path, reference: tuple[dict[str, str], float],
                                                         tmp_path: Path, point: str) -> None:
    """SIGKILL the moment the site shows that the run reached ``point``; the next run
    gives the reference site. ("state written mid-run" is the point where, before,
    every later run reported success with 0 target indexes.)"""
    for attempt in range(5):  # a point only milliseconds long may be missed: try again
        site = tmp_path / f"site-{attempt}"
        if _stopped_at(point, batch, site):
            break
    else:
        pytest.fail(f"the run never stopped at {point!r} in 5 tries")
    _finish_and_compare(batch, site, reference[0])


def _stopped_at(point: str, batch: Path, site: Path) -> bool:
    condition = KILL_POINTS[point]
    if not kill_when(start_index(batch, site), lambda: condition(site)):
        return False
    # the mid-run state must still be the one the run left (not the final one)
    return point != "state written mid-run" or (_state(site) or {}).get("renderer") == ""


def test_a_run_killed_after_any_delay_is_finished_by_the_next(batch: Path,
                                                              reference: tuple[dict[str, str], float],
                                                              tmp_path: Path) -> None:
    """SIGKILL after a sweep of delays, in steps of a twelfth of an uninterrupted run,
    until a run is found finished before its kill: every time, the next run gives the
    reference site. (The step is measured here, under the machine's present load.)"""
    expected, _ = reference
    started = time.monotonic()
    run_cli("index", batch, "-o", tmp_path / "timed", "-j", "2")
    step = (time.monotonic() - started) / 12
    killed = 0
    for number in range(40):
        site = tmp_path / f"site-{number}"
        process = start_index(batch, site)
        time.sleep(step * number)  # the sweep itself: a delay, not a wait for a condition
        still_going = process.poll() is None
        process.send_signal(signal.SIGKILL)
        process.wait()
        _finish_and_compare(batch, site, expected)
        if not still_going:
            break
        killed += 1
    assert killed >= 3, f"only {killed} runs were still going when killed"


# --- refused runs leave nothing new behind --------------------------------------------------


@pytest.fixture(scope="module")
def good_and_bad(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("good-and-bad")
    good = make_noarch_wheels(root / "good", 1, 1, start=500)[0]
    bad = corrupt_copy(make_noarch_wheels(root / "src", 1, 1, start=501)[0], root / "bad")
    return good, bad


def _refused(proc: subprocess.CompletedProcess[str], message: str) -> None:
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kernel-wheels:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_refused_first_run_leaves_no_site(tmp_path: Path, good_and_bad: tuple[Path, Path]) -> None:
    good, bad = good_and_bad
    site = tmp_path / "new" / "site"
    _refused(run_cli("index", good, bad, "-o", site, check=False), f"{bad.name} refused: [record]")
    assert not (tmp_path / "new").exists()


def test_a_refused_run_into_an_empty_folder_leaves_it_empty(tmp_path: Path,
                                                              good_and_bad: tuple[Path, Path]) -> None:
    good, bad = good_and_bad
    site = tmp_path / "site"
    site.mkdir()
    _refused(run_cli("index", good, bad, "-o", site, check=False), f"{bad.name} refused: [record]")
    assert list(site.iterdir()) == []


def test_a_run_waiting_for_a_refused_one_builds_the_site(tmp_path: Path, good_and_bad: tuple[Path, Path]) -> None:
    """The first run on a new site is refused and removes the site while a second run
    waits for its lock: the second takes a new lock and builds the site (its lock was
    on a file that no longer exists)."""
    _good, bad = good_and_bad
    many = make_noarch_wheels(tmp_path / "many", 600, 1, name="waiting")
    shutil.copy(bad, many[0].parent / bad.name)
    second = make_noarch_wheels(tmp_path / "second", 3, 1, name="second")
    site = tmp_path / "site"
    first = subprocess.Popen([sys.executable, "-m", "kernel_wheels", "index", str(many[0].parent), "-o",
                              str(site), "-j", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not _count(site, ".kernel-wheels/staging/incoming/*"):  # the first run holds the site
        assert first.poll() is None, first.communicate()
        time.sleep(0.001)
    waiting = subprocess.run([sys.executable, "-m", "kernel_wheels", "index", str(second[0].parent), "-o",
                              str(site)], capture_output=True, text=True, timeout=300)
    _out, first_err = first.communicate(timeout=300)
    assert first.returncode == 1 and f"{bad.name} refused" in first_err, first_err
    assert "waiting for another kernel-wheels run" in waiting.stderr, waiting.stderr
    assert waiting.returncode == 0, waiting.stderr
    assert validate_site(site)["simple"] == {p.name for p in second}


# --- names and links never lead a write outside the site ------------------------------------------


def test_a_wheel_name_with_a_control_character_is_refused(tmp_path: Path) -> None:
    wheel = make_noarch_wheels(tmp_path / "w", 1, 1, name="named")[0]
    odd = wheel.with_name("named\n\x1b[2J_00000-1.0.0-py3-none-any.whl")
    wheel.rename(odd)
    site = tmp_path / "site"
    proc = run_cli("index", odd, "-o", site, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "has a control character or a backslash in it" in proc.stderr and "\x1b" not in proc.stderr
    assert not site.exists()


@pytest.mark.parametrize("folder", ["files", "simple"])
def test_a_site_folder_linked_outside_is_never_written_through(tmp_path: Path, folder: str) -> None:
    """Someone replaced site/files (or site/simple) by a link to a folder outside the
    site: the next run stops with one line, and writes nothing there."""
    site = tmp_path / "site"
    run_cli("index", make_noarch_wheels(tmp_path / "first", 1, 1, name="first")[0], "-o", site)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(site / folder, outside / folder)
    (site / folder).symlink_to(outside / folder)
    before = snapshot(outside)
    later = make_noarch_wheels(tmp_path / "later", 1, 1, name="later")[0]
    proc = run_cli("index", later, "-o", site, check=False)
    _refused(proc, "(through a link); refusing")
    assert snapshot(outside) == before
    assert not any(later.name in name or "later" in name for name in os.listdir(outside / folder))


ORPHAN = """
import os, sys
from kernel_wheels.processes import die_with_parent
parent = os.getpid()
read, write = os.pipe()
if os.fork() == 0:  # a pool worker, its initializer not run yet
    os.close(write)
    with open(sys.argv[1], "w") as out:
        out.write(str(os.getpid()))
    os.read(read, 1)  # returns once the run is gone
    try:
        die_with_parent(parent)
    finally:
        # Returning is allowed while the run is still mid-exit (its files are closed
        # before its children are handed over and signalled): only a worker still
        # here once the run has been reaped has outlived it.
        import time
        deadline = time.monotonic() + 60
        while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(sys.argv[2], "w") as out:
            out.write("survived")
        os._exit(0)
os.close(read)
os._exit(0)  # the run, gone (as if killed) before its worker's initializer ran
"""


def test_a_worker_whose_run_died_before_its_initializer_goes_too(tmp_path: Path) -> None:
    """The race the kill sweep found: a run killed between forking a checking worker
    and that worker's PR_SET_PDEATHSIG gets no signal to it; the worker, holding the
    site lock's descriptor, waited forever, and so did every later run on the site.
    Here the run exits at exactly that moment (a real fork, a real exit)."""
    pid_file, survived, reaped = tmp_path / "pid", tmp_path / "survived", tmp_path / "reaped"
    subprocess.run([sys.executable, "-c", ORPHAN, str(pid_file), str(survived), str(reaped)], check=True)
    reaped.touch()  # the run has exited and been waited for: nothing of its exit is left to happen
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)
    orphan = int(pid_file.read_text())
    while _running(orphan) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _running(orphan), "the orphaned worker is still there"
    assert not survived.exists(), survived.read_text()


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
