"""Running compilers: up to ``jobs`` at once, one progress line per file, unchanged
files taken from the object cache, and on the first failure every other compiler
stopped at once (fail fast). Each compiler runs in its own process group, so stopping
it also stops what it started (nvcc's cicc, ptxas and host compiler); the caller's
``finally`` (or an interrupt) never leaves one running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError
from ..progress import as_progress
from . import object_cache
from .compile_env import CompileUnit
from .environment import tool_environment

Log = Callable[[str], None]
_POLL_SECONDS = 0.02
#: compiler output lines kept in an error message
ERROR_TAIL_LINES = 25


@dataclass
class _Running:
    unit: CompileUnit
    process: subprocess.Popen[bytes]
    output: Path
    depfile: Path
    log_path: Path
    key: str
    started: float


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block ends, then act as they would have.

    Around starting a compiler and recording it: an interrupt that lands inside
    ``Popen`` (after the fork, while it waits for the exec) would leave a compiler that
    nothing knows of, running after the tool has exited; a busy machine widens that
    window. Held rather than blocked with a signal mask, which the compiler would inherit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: held.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            signal.raise_signal(held[0])  # handled now, by the handler it was meant for


def compiler_failure(what: str, returncode: int, log_path: Path) -> BuildError:
    text = log_path.read_text(errors="replace").strip()
    tail = "\n".join(text.splitlines()[-ERROR_TAIL_LINES:])
    return BuildError(f"{what} failed (exit {returncode}):\n{tail}" if tail
                      else f"{what} failed (exit {returncode})")


def compile_units(units: list[CompileUnit], workdir: Path, jobs: int,
                  compiler_ids: dict[str, str], log: Log, label: str = "") -> list[Path]:
    """Compile every unit; returns the object files in the units' order."""
    objects: dict[int, Path] = {}
    total = len(units)
    done = 0
    prefix = f"{label}: " if label else ""
    task = as_progress(log).task(f"{prefix}compiling", total)
    pending: deque[tuple[int, CompileUnit, str]] = deque()
    for index, unit in enumerate(units):
        key = object_cache.command_key(unit.arguments, unit.source, compiler_ids[unit.language])
        cached = object_cache.lookup(key, object_cache.extension_name(unit.arguments))
        if cached is not None:
            objects[index] = cached
            done += 1
            task.advance()
            log(f"  {prefix}[{done}/{total}] {unit.relpath} (unchanged)")
        else:
            pending.append((index, unit, key))
    running: dict[int, _Running] = {}
    environment = tool_environment()
    try:
        while pending or running:
            while pending and len(running) < jobs:
                index, unit, key = pending.popleft()
                output = workdir / unit.object_name
                log_path = workdir / f"{unit.object_name}.log"
                depfile = workdir / f"{unit.object_name}.d"
                with _signals_held(), log_path.open("wb") as sink:
                    # the allow-listed environment (no credentials), and the work folder
                    # as the current one: what a compiler writes next to itself stays there
                    process = subprocess.Popen(unit.command(output, depfile), stdout=sink,
                                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                               start_new_session=True, env=environment,
                                               cwd=workdir)
                    running[index] = _Running(unit, process, output, depfile, log_path, key,
                                              time.monotonic())
            for index, job in list(running.items()):
                returncode = job.process.poll()
                if returncode is None:
                    continue
                del running[index]
                if returncode != 0:
                    raise compiler_failure(f"compiling {job.unit.relpath}", returncode, job.log_path)
                objects[index] = object_cache.store(
                    job.key, object_cache.extension_name(job.unit.arguments), job.output, job.depfile)
                done += 1
                task.advance()
                log(f"  {prefix}[{done}/{total}] {job.unit.relpath} "
                    f"({time.monotonic() - job.started:.1f} s)")
            if running:
                time.sleep(_POLL_SECONDS)
    finally:
        task.finish()
        for job in running.values():
            _stop(job.process)
    return [objects[i] for i in range(total)]


def run_tool(command: list[str], what: str, workdir: Path) -> None:
    """One step that is not a compile (the link): same output and error handling."""
    log_path = workdir / f"tool-{time.monotonic_ns()}.log"
    process: subprocess.Popen[bytes] | None = None
    with log_path.open("wb") as sink:
        try:
            with _signals_held():
                process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True,
                                           env=tool_environment(), cwd=workdir)
            returncode = process.wait()
        finally:
            if process is not None and process.poll() is None:
                _stop(process)
    if returncode != 0:
        raise compiler_failure(what, returncode, log_path)


def compiler_id(command: str) -> str:
    """The compiler's version banner: part of each object's cache key, so a compiler
    upgrade recompiles everything."""
    proc = subprocess.run([command, "--version"], capture_output=True, text=True,
                          env=tool_environment())
    return f"{command}\n{proc.stdout.strip()}"
