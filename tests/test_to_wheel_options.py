"""`kernel-wheels to-wheel`'s options and environment, checked before any work: every
invalid option value is refused with exit 2 before any network work (HF_ENDPOINT points
at a server that records every request, and none arrives); --json prints a JSON error
object on failure too; credentials in a git URL are never printed or packed; the
repository id a wheel records (--repo-id, metadata.json); progress bars, -q and -v.
Issue #9's command-line rows (docs/reliability.md) are counted with faults.tally."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from support.faults import FaultProxy, one_error_line, tally
from support.helpers import Olah, olah_server, one_line_error, read_member, run_cli

CPU = "torch213-cxx11-cpu-x86_64-linux"
CPU_VARIANT = CPU
CPU_WHEEL = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
PROGRESS_UNITS = re.compile(r"\d[\d.]*[kMG]?B/s")  # tqdm's rate of a byte bar, e.g. 1.2MB/s


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[tuple[FaultProxy, dict[str, str]]]:
    """A Hub that must stay unasked: it records every request."""
    with FaultProxy(None) as server:
        yield server, {"HF_ENDPOINT": server.endpoint, "HF_HOME": str(tmp_path / "hf"),
                       "KERNEL_WHEELS_CACHE": str(tmp_path / "kw")}


# (arguments after the command, extra environment, the error after "kernel-wheels: error: ")
TO_WHEEL = [
    (["--torch", "abc"], {}, "--torch 'abc' is not a torch version like 2.7"),
    (["--backend", "bogus"], {}, "--backend 'bogus' is not a backend (cann, cpu, cuda, metal, neuron, npu, rocm, "
                                 "tpu, universal, xpu) or a backend tag like cu128"),
    (["--arch", "sparc"], {}, "--arch 'sparc' is not one of x86_64, aarch64"),
    (["--os", "plan9"], {}, "--os 'plan9' is not one of linux, darwin, windows"),
    (["--variant", " "], {}, "--variant is empty"),
    (["--compression", "10"], {}, "--compression 10: a deflate level is 0 (store) to 9 (smallest)"),
    (["--compression", "-1"], {}, "--compression -1: a deflate level is 0 (store) to 9 (smallest)"),
    (["--python-version", "2.7"], {}, "--python-version '2.7' is not like 3.9"),
    (["--manylinux-version", "x"], {}, "--manylinux-version 'x' is not like 2.28"),
    (["--macos-version", "x"], {}, "--macos-version 'x' is not like 15.0 (or auto)"),
    (["--macos-version", "15.4"], {}, "--macos-version '15.4': wheel tags name macOS 11 and later "
                                      "by major release only (15.0 or 16.0)"),
    (["--manylinux-version", "auto", "--no-check"], {}, "--manylinux-version auto needs the checks (drop --no-check)"),
    (["--dist-name", "a b!"], {}, "'a b!' is not a valid distribution name"),
    (["--timeout", "0"], {}, "--timeout 0.0: give a finite number of seconds above 0"),
    (["--timeout", "inf"], {}, "--timeout inf: give a finite number of seconds above 0"),
    (["--timeout", "nan"], {}, "--timeout nan: give a finite number of seconds above 0"),
    (["--retries", "-1"], {}, "--retries -1: give 0 to 100"),
    (["--retries", "101"], {}, "--retries 101: give 0 to 100"),
    ([], {"KERNEL_WHEELS_TIMEOUT": "soon"}, "KERNEL_WHEELS_TIMEOUT='soon' is not a number"),
    ([], {"KERNEL_WHEELS_RETRIES": "x"}, "KERNEL_WHEELS_RETRIES='x' is not a number"),
    ([], {"SOURCE_DATE_EPOCH": "yesterday"}, "SOURCE_DATE_EPOCH 'yesterday' is not an integer"),
]


VERSIONS = [
    (["1.x"], "'1.x' is not a version (1.1.2), a range ('>=1.1,<2') or a major (1)"),
    (["1.x", "--revision", "main"], "'1.x' is not a valid version (PEP 440)"),
    ([">=1,<"], "'>=1,<' is not a valid version range"),
    (["--revision", ""], "--revision is empty"),
    ([], "give a VERSION (e.g. 1.1.2, '>=1.1,<2' or 1) or --revision"),
]


ARGPARSE = [  # argparse's own errors: its usage, then "PROG: error: ..."
    (["1.1.2", "--jobs", "x"], "kernel-wheels to-wheel: error: argument -j/--jobs: 'x' is not a whole number"),
    (["1.1.2", "-j", "-3"], "kernel-wheels to-wheel: error: argument -j/--jobs: -3: give 1 or more (leave it "
                            "out for one per CPU)"),
    (["1.1.2", "--timeout", "abc"], "kernel-wheels to-wheel: error: argument --timeout: invalid float value: 'abc'"),
    (["1.1.2", "--repo-type", "dataset"], "kernel-wheels to-wheel: error: argument --repo-type: invalid choice: "
                                          "'dataset' (choose from 'kernel', 'model')"),
    # The command's own usage and name, not the top level's (issue #22).
    (["1.1.2", "--no-such-option"], "kernel-wheels to-wheel: error: unrecognized arguments: --no-such-option"),
]


def test_every_invalid_option_is_refused_before_any_network_work(
        recorder: tuple[FaultProxy, dict[str, str]], tmp_path: Path) -> None:
    server, env = recorder
    tried = 0
    for args, extra, message in TO_WHEEL:
        proc = run_cli("to-wheel", "drbh/img2gray", "1.1.2", *args, "-o", tmp_path / "out", env={**env, **extra},
                       check=False)
        assert one_error_line(proc, 2) == message, args
        tried += 1
        if args[:1] in (["--torch"], ["--backend"], ["--arch"], ["--os"], ["--variant"], ["--timeout"],
                        ["--retries"]) or "KERNEL_WHEELS_TIMEOUT" in extra or "KERNEL_WHEELS_RETRIES" in extra:
            proc = run_cli("variants", "drbh/img2gray", "1.1.2", *args, "--json", env={**env, **extra}, check=False)
            assert one_error_line(proc, 2) == message, ("variants", args)
            assert json.loads(proc.stdout)["error"]["message"] == message
            tried += 1
    for args, message in VERSIONS:
        proc = run_cli("to-wheel", "drbh/img2gray", *args, "-o", tmp_path / "out", env=env, check=False)
        assert one_error_line(proc, 2) == message
        tried += 1
    for args, message in ARGPARSE:
        proc = run_cli("to-wheel", "drbh/img2gray", *args, env=env, check=False)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == message
        tried += 1
    proc = run_cli("to-wheel", "not a source!", "1.1.2", env=env, check=False)
    assert one_error_line(proc, 2) == "'not a source!' is not an existing folder, a git URL or a Hub repository id (org/name)"
    assert server.log == [], server.log  # not one request reached the Hub
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    tally("cli", inputs=tried + 1, inspected=1)


def test_output_folder_problems_are_found_before_any_download(recorder: tuple[FaultProxy, dict[str, str]],
                                                              tmp_path: Path) -> None:
    server, env = recorder
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run_cli("to-wheel", "drbh/img2gray", "1.1.2", "-o", blocker, env=env, check=False)
    assert one_error_line(proc, 2) == f"cannot write wheels to {blocker}: {blocker} is a file, not a folder"
    assert server.log == []
    tally("cli", inputs=1)


def test_json_error_objects(recorder: tuple[FaultProxy, dict[str, str]], kernel_repo: Path, tmp_path: Path) -> None:
    _, env = recorder
    cases = [
        (["to-wheel", "drbh/img2gray", "1.1.2", "--torch", "abc", "--json"], 2, "UsageError",
         "--torch 'abc' is not a torch version like 2.7"),
        (["to-wheel", "drbh/img2gray", "1.1.2", "--jobs", "x", "--json"], 2, "UsageError",
         "argument -j/--jobs: 'x' is not a whole number"),
        (["to-wheel", kernel_repo, "9.9.9", "-o", tmp_path / "out", "--json"], 1, "RevisionNotFoundError",
         "version 9.9.9 not found; versions that exist: 1.1.1, 1.1.2, 1 (branch v1)"),
        (["to-wheel", "drbh/img2gray", "1.1.2", "--retries", "0", "--timeout", "1", "-o", tmp_path / "out", "--json"],
         1, "NetworkError", None),  # the recorder answers 503
        (["variants", kernel_repo, "9.9.9", "--json"], 1, "RevisionNotFoundError",
         "version 9.9.9 not found; versions that exist: 1.1.1, 1.1.2, 1 (branch v1)"),
        (["check", tmp_path / "missing.whl", "--json"], 2, "UsageError", f"{tmp_path / 'missing.whl'} does not exist"),
        (["check", "--json"], 2, "UsageError", "the following arguments are required: WHEEL_OR_DIR"),
    ]
    for args, code, kind, message in cases:
        proc = run_cli(*args, env=env, check=False)
        assert proc.returncode == code, (args, proc.stderr)
        error = json.loads(proc.stdout)["error"]
        assert error["type"] == kind and error["exit_code"] == code, (args, error)
        if message is not None:
            assert error["message"] == message
        else:
            assert error["message"] == proc.stderr.strip().splitlines()[-1].removeprefix("kernel-wheels: error: ")
    tally("cli", inputs=len(cases))


def test_credentials_in_a_git_url_are_never_printed_or_packed(kernel_repo: Path, tmp_path: Path) -> None:
    secret = "ghp_kwFakeGitToken0123456789"
    # a clone whose origin carries credentials: the wheel records the canonical URL only
    clone = tmp_path / "img2gray"
    subprocess.run(["git", "clone", "-q", str(kernel_repo), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "remote", "set-url", "origin",
                    f"https://ci-bot:{secret}@github.com/acme/img2gray.git"], check=True)
    proc = run_cli("to-wheel", clone, "1.1.2", "-o", tmp_path / "out", "--variant", CPU, "--json")
    wheel = next((tmp_path / "out").glob("*.whl"))
    assert json.loads(read_member(wheel, "kernel_wheels.json"))["source"] == "https://github.com/acme/img2gray"
    assert secret not in proc.stdout + proc.stderr and secret.encode() not in wheel.read_bytes()
    # a URL with credentials that cannot be reached: the error shows it redacted
    with FaultProxy(None) as server:
        url = f"http://ci-bot:{secret}@127.0.0.1:{server.port}/acme/img2gray.git"
        for command in (["to-wheel", url, "1.1.2", "-o", tmp_path / "out2", "--json"], ["variants", url, "--json"]):
            proc = run_cli(*command, env={"KERNEL_WHEELS_CACHE": str(tmp_path / "kw")}, check=False)
            message = one_error_line(proc)
            assert f"http://***@127.0.0.1:{server.port}/acme/img2gray.git" in message
            assert secret not in proc.stdout + proc.stderr
    tally("cli", inputs=3)


def kw(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "kernel_wheels", *map(str, args)]


@pytest.fixture(scope="module")
def hub(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Olah]:
    root = tmp_path_factory.mktemp("conv-olah")
    shutil.copytree(repo, root / "mirror" / "kernels" / "drbh" / "img2gray")
    with olah_server(root, root / "mirror", "kernels/drbh/img2gray") as server:
        yield server


def hub_env(hub: Olah, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf-home"),
            "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache")}


def test_progress_bars_on_a_terminal_with_bytes_and_rate(hub: Olah, tmp_path: Path) -> None:
    """A download from the Hub and the wheel's writing each draw a tqdm bar with bytes
    and a rate, on a terminal; with stderr a pipe, none (unless --progress-bar on)."""
    env = hub_env(hub, tmp_path)
    child = pexpect.spawn(sys.executable, ["-m", "kernel_wheels", "to-wheel", "drbh/img2gray", "1.1.2",
                                           "-o", str(tmp_path / "tty")],
                          env=env, encoding="utf-8", timeout=300, dimensions=(40, 160))
    child.expect(pexpect.EOF)
    child.close()
    shown = child.before
    assert child.exitstatus == 0, shown
    assert f"build/{CPU_VARIANT}:" in shown and "writing img2gray-1.1.2" in shown
    assert PROGRESS_UNITS.search(shown), shown
    assert f"☸ {CPU_WHEEL}" in shown

    piped = subprocess.run(kw("to-wheel", "drbh/img2gray", "1.1.2", "-o", tmp_path / "pipe"),
                           env={**env, "HF_HOME": str(tmp_path / "hf-2")}, capture_output=True, text=True)
    assert piped.returncode == 0 and f"☸ {CPU_WHEEL}" in piped.stderr
    assert not PROGRESS_UNITS.search(piped.stderr) and "\r" not in piped.stderr
    forced = subprocess.run(kw("to-wheel", "drbh/img2gray", "1.1.2", "-o", tmp_path / "on",
                               "--progress-bar", "on"),
                            env={**env, "HF_HOME": str(tmp_path / "hf-3")}, capture_output=True, text=True)
    assert forced.returncode == 0 and PROGRESS_UNITS.search(forced.stderr), forced.stderr
    assert forced.stdout == ""  # bars never touch stdout (--json's)
    for folder in ("pipe", "on"):
        assert (tmp_path / folder / CPU_WHEEL).read_bytes() == (tmp_path / "tty" / CPU_WHEEL).read_bytes()


def test_quiet_verbose_and_files_left_out(cpu_build: Path, tmp_path: Path) -> None:
    """Byte-code caches are left out of a wheel by design: said only with -v, naming
    exactly those files. -q keeps warnings, -qq says nothing."""
    variant = tmp_path / CPU_VARIANT
    shutil.copytree(cpu_build, variant)
    cache = variant / "img2gray" / "__pycache__" if (variant / "img2gray").is_dir() else variant / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "ops.cpython-311.pyc").write_bytes(b"\x00")
    plain = run_cli("to-wheel", variant, "1.1.2", "-o", tmp_path / "a")
    assert "left out" not in plain.stderr and f"☸ {CPU_WHEEL}" in plain.stderr
    verbose = run_cli("to-wheel", variant, "1.1.2", "-o", tmp_path / "b", "-v")
    (line,) = [line for line in verbose.stderr.splitlines() if "left out" in line]
    relpath = cache.relative_to(variant).as_posix() + "/ops.cpython-311.pyc"
    assert line == f"build/{CPU_VARIANT}: 1 byte-code cache file(s) left out by design: {relpath}"
    quiet = run_cli("to-wheel", variant, "1.1.2", "-o", tmp_path / "c", "-q", "--no-check")
    assert quiet.stderr.strip().splitlines() == [
        "warning: --no-check: wheels are written WITHOUT checking that they are what their names "
        "claim"] or all(line.startswith("warning:") for line in quiet.stderr.splitlines()), quiet.stderr
    silent = run_cli("to-wheel", variant, "1.1.2", "-o", tmp_path / "d", "-qq", "--no-check")
    assert silent.stderr == "" and (tmp_path / "d" / CPU_WHEEL).is_file()


@pytest.mark.parametrize("repo_id", ["acme", "acme/../x", "a/b=c", "a/b:c"])
def test_to_wheel_refuses_a_malformed_repo_id(kernel_folder: Path, tmp_path: Path,
                                              repo_id: str) -> None:
    proc = run_cli("to-wheel", kernel_folder, "1.1.2", "--repo-id", repo_id, "-o", tmp_path,
                   check=False)
    one_line_error(proc, "--repo-id", "org/name", status=2)
    assert not list(tmp_path.iterdir())


def test_metadata_repo_id_from_a_hostile_folder_is_refused(kernel_folder: Path,
                                                           tmp_path: Path) -> None:
    root = tmp_path / "k"
    shutil.copytree(kernel_folder, root)
    meta_path = next(root.glob("build/*/metadata.json"))
    meta = json.loads(meta_path.read_text())
    meta["repo-id"] = "acme/x=/etc:evil/y"
    meta_path.write_text(json.dumps(meta))
    proc = run_cli("to-wheel", root, "1.1.2", "-o", tmp_path / "out", check=False)
    one_line_error(proc, "repo-id", status=1)


def test_to_wheel_output_that_is_a_file_is_a_usage_error(kernel_folder: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    proc = run_cli("to-wheel", kernel_folder, "1.1.2", "-o", tmp_path / "afile", check=False)
    one_line_error(proc, "afile is a file, not a folder", status=2)
