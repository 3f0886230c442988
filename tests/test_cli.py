"""What every command shares (the roof, `cli/`): help text on every argument, -q/-v on
every command, argparse's usage errors with the command's own usage, --jobs, output
folders and --python checked before any work, closed pipes, singular counts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import SAMPLE, one_line_error, run_cli
from support.hostile_index import HostileIndex


@pytest.mark.parametrize("command", ["to-wheel", "check", "variants"])
def test_every_argument_has_help_text(command: str) -> None:
    from kernel_wheels.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
    missing = [a.dest for a in sub._actions if not a.help or not a.help.strip()]
    assert missing == []
    assert run_cli(command, "--help").stdout.count("examples:") == 1


def kw(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "kernel_wheels", *map(str, args)]


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


def test_quiet_and_verbose_on_every_command() -> None:
    from kernel_wheels.cli import COMMANDS

    for command in COMMANDS:
        name = command.replace("_", "-")
        shown = run_cli(name, "--help").stdout
        for option in ("-q, --quiet", "-v, --verbose", "--progress-bar {auto,on,off}"):
            assert option in shown, (name, option)


@pytest.mark.parametrize("command", [["variants", "{variant}", "1.1.2", "--json"],
                                     ["check", "{wheels}", "--json"], ["completion", "bash"]])
def test_a_closed_pipe_ends_quietly_with_141(command: list[str], cpu_build: Path, wheels: Path) -> None:
    """`kernel-wheels ... | head -1`: the reader is gone before the output is written
    (here: always, a pipe whose reading end is closed first). Exit 141 (as SIGPIPE),
    nothing on stderr."""
    args = [a.format(variant=cpu_build, wheels=wheels) for a in command]
    for _ in range(3):
        read, write = os.pipe()
        os.close(read)
        try:
            proc = subprocess.run(kw(*args), stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            os.close(write)
        assert (proc.returncode, proc.stderr) == (141, ""), proc.stderr


def test_head_one_in_a_shell(cpu_build: Path) -> None:
    command = " ".join(kw("variants", cpu_build, "1.1.2", "--json"))
    for _ in range(3):
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} | head -1"],
                              capture_output=True, text=True, timeout=120)
        assert proc.stdout == "{\n" and "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr
        assert proc.returncode in (0, 141)


def test_a_mistyped_option_shows_the_commands_usage() -> None:
    proc = run_cli("install", "img2gray", "--index-ulr", "http://x/simple", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: kernel-wheels install ")
    assert proc.stderr.strip().splitlines()[-1] == \
        "kernel-wheels install: error: unrecognized arguments: --index-ulr http://x/simple"


@pytest.mark.parametrize("command", [["to-wheel", "x", "1.1.2"], ["check", "x"], ["index", "x", "-o", "s"],
                                     ["build", "x", "-o", "o"]])
def test_jobs_zero_is_refused(command: list[str]) -> None:
    proc = run_cli(*command, "-j", "0", check=False)
    assert proc.returncode == 2
    assert one_error_line(proc).endswith("argument -j/--jobs: 0: give 1 or more (leave it out for one per CPU)")


def test_output_is_checked_before_any_work(wheels: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = {
        ("index", wheels, "-o", a_file): f"-o {a_file} is a file, not a folder; give a folder",
        ("build", SAMPLE, "-o", a_file / "out"): f"-o {a_file / 'out'} cannot be made: {a_file} is a file, "
                                                 "not a folder; give a folder",
        ("yank", a_file, "img2gray", "1.1.2"): f"SITE {a_file} is a file, not a folder; give a folder",
    }
    for args, message in cases.items():
        cache = tmp_path / f"cache-{args[0]}"
        proc = run_cli(*args, env={"KERNEL_WHEELS_CACHE": str(cache)}, check=False)
        assert (proc.returncode, one_error_line(proc)) == (2, f"kernel-wheels: error: {message}")
        assert not list(cache.glob("build-*"))  # no compiling first: no work folder, no object
    to_wheel = run_cli("to-wheel", wheels, "1.1.2", "-o", a_file, check=False)
    assert to_wheel.returncode != 0 and "is a file, not a folder" in one_error_line(to_wheel)


def test_a_read_only_site_is_one_line_before_any_work(wheels: Path, site: Path, tmp_path: Path) -> None:
    """index -o and yank on a read-only file system (a bind mount in a private mount
    namespace: unshare -m), and build -o: one line each, no OS error text."""
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    commands = [kw("index", wheels, "-o", copy), kw("yank", copy, "img2gray", "1.1.2"),
                kw("build", SAMPLE, "-o", copy / "out")]
    script = f"mount --bind -o ro {copy} {copy}" + "".join(
        f" ; {' '.join(map(str, command))}; echo rc=$?" for command in commands)
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.stdout.split() == ["rc=2"] * 3, proc.stderr
    assert proc.stderr.splitlines() == [
        f"kernel-wheels: error: -o {copy}: cannot write there (a read-only file system); give a folder you can "
        "write to",
        f"kernel-wheels: error: SITE {copy}: cannot write there (a read-only file system); give a folder you can "
        "write to",
        f"kernel-wheels: error: -o {copy / 'out'}: cannot write there (a read-only file system); give a folder "
        "you can write to"]


def test_hf_endpoint_without_a_scheme_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("variants", "drbh/img2gray", "1.1.2", env={
        "HF_ENDPOINT": "127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}, check=False)
    assert (proc.returncode, one_error_line(proc)) == (
        2, "kernel-wheels: error: HF_ENDPOINT '127.0.0.1:9' is not an http(s) URL: write it with its "
           "scheme, e.g. http://127.0.0.1:9 or https://...")
    assert "trying again" not in proc.stderr  # refused as given, not tried and retried


@pytest.mark.parametrize("command", [["install", "img2gray", "--no-index", "-f", "."],
                                     ["local-kernels"]])
def test_python_that_does_not_exist_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    proc = run_cli(*command, "--python", tmp_path / "nonexistent", check=False)
    one_line_error(proc, "--python", "no Python interpreter", status=2)


def test_counts_of_one_are_singular(kernel_folder: Path, tmp_path: Path) -> None:
    converted = run_cli("to-wheel", kernel_folder, "1.1.2", "-o", tmp_path / "wheels")
    assert "done: 1 wheel of " in converted.stderr, converted.stderr
    proc = run_cli("index", tmp_path / "wheels", "-o", tmp_path / "site")
    assert "1 wheel, 1 project, 1 target index;" in proc.stderr, proc.stderr
    with HostileIndex() as gone:
        closed = gone.base.rstrip("/")
    failed = run_cli("versions", "acme/img2gray", "--retries", "0",
                     env={"HF_ENDPOINT": closed, "HF_HOME": str(tmp_path / "hf")}, check=False)
    line = one_line_error(failed, "after 1 try ")
    assert "1 tries" not in line
