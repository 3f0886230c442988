"""Running commands N times, interleaved, with wall time and (optionally) peak RSS.

Wall time: ``time.perf_counter`` around the whole process, from spawn to exit, so
interpreter start-up and imports count (users pay them too).

Peak RSS: a thread samples the process tree every few milliseconds (``psutil``: the
process and all its descendants, e.g. worker processes) and keeps the largest *sum* of
their resident set sizes. Pages shared between processes (a forked worker's copy of its
parent) are counted once per process, so the sum is an upper bound of the memory the
tree really uses. (cgroup v1 on this machine has no per-command ``memory.peak``.)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # in .venv; its stubs (types-psutil) are not

from .config import WORK

RSS_INTERVAL_S = 0.005


@dataclass(frozen=True)
class Sample:
    seconds: float
    peak_rss: int | None  # bytes, when sampled


@dataclass
class Job:
    """One command measured repeatedly. ``prepare`` runs before each run and ``verify``
    after it, both untimed (fresh output folders, checking the result)."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path | None = None
    prepare: Callable[[], None] | None = None
    verify: Callable[[], None] | None = None
    sample_rss: bool = False
    accept: tuple[int, ...] = (0,)  # exit statuses that are results, not failures
    samples: list[Sample] = field(default_factory=list)
    returncodes: list[int] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def median_rss(self) -> float:
        return statistics.median(s.peak_rss or 0 for s in self.samples)


class CommandFailed(RuntimeError):
    pass


def base_env() -> dict[str, str]:
    """This environment without anything that would point a tool at another Hub or cache.
    Byte-code writing stays as a user has it: every tool runs from compiled modules, as
    after ``pip install`` (``compile_tools``); PYTHONDONTWRITEBYTECODE in the caller's
    environment would make the editable kernel-wheels compile itself on every run."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_", "KERNEL_WHEELS_"))
           and k not in ("SOURCE_DATE_EPOCH", "PYTHONDONTWRITEBYTECODE")}
    env.update(HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1")
    return env


def compile_tools(python: Path, *packages: str) -> None:
    """Compile ``packages`` (as importable by ``python``) to byte code, as ``pip install``
    does for a regular install; an editable install (kernel-wheels in .venv) otherwise
    compiles its modules on its first run, inside a measurement."""
    code = ("import compileall, importlib.util, sys\n"
            "for name in sys.argv[1:]:\n"
            "    spec = importlib.util.find_spec(name)\n"
            "    for folder in spec.submodule_search_locations:\n"
            "        compileall.compile_dir(folder, quiet=1)\n")
    subprocess.run([str(python), "-c", code, *packages], check=True, env=base_env())


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            continue  # exited between listing and reading
    return total


def _sample_peak(pid: int, done: threading.Event, peak: list[int]) -> None:
    try:
        process = psutil.Process(pid)
    except psutil.Error:
        return
    while not done.is_set():
        peak[0] = max(peak[0], _tree_rss(process))
        time.sleep(RSS_INTERVAL_S)


def run_once(job: Job) -> Sample:
    """Run ``job`` once (prepare, time, verify); raise CommandFailed on a non-zero exit."""
    if job.prepare:
        job.prepare()
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / f"{job.name}.out", logs / f"{job.name}.err"
    peak = [0]
    done = threading.Event()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        start = time.perf_counter()
        process = subprocess.Popen(list(job.argv), env=dict(job.env), cwd=job.cwd, stdout=out,
                                   stderr=err, stdin=subprocess.DEVNULL)
        sampler = None
        if job.sample_rss:
            sampler = threading.Thread(target=_sample_peak, args=(process.pid, done, peak), daemon=True)
            sampler.start()
        returncode = process.wait()
        seconds = time.perf_counter() - start
        done.set()
        if sampler:
            sampler.join()
    job.returncodes.append(returncode)
    if returncode not in job.accept:
        tail = err_path.read_text(errors="replace")[-1500:]
        raise CommandFailed(f"{job.name}: {' '.join(map(str, job.argv))} exited {returncode}:\n{tail}")
    if job.verify:
        job.verify()
    return Sample(seconds, peak[0] if job.sample_rss else None)


def run_interleaved(jobs: Sequence[Job], runs: int, progress: Callable[[str], None]) -> None:
    """``runs`` rounds; each round runs every job once, in an order rotated per round, so
    that a slow spell of a busy machine does not land on one job's runs only."""
    for round_index in range(runs):
        shift = round_index % len(jobs)
        for job in [*jobs[shift:], *jobs[:shift]]:
            sample = run_once(job)
            job.samples.append(sample)
            rss = f", peak RSS {sample.peak_rss / 1e6:.0f} MB" if sample.peak_rss else ""
            progress(f"    run {round_index + 1}/{runs} {job.name}: {sample.seconds:.2f} s{rss}")


def load() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (how busy the machine was)."""
    return os.getloadavg()
