"""Issue #9, the command line: every invalid option value is refused with exit 2 before
any network work (HF_ENDPOINT points at a server that records every request, and none
arrives); --json prints a JSON error object on failure too; `check` exits as its help
says; every argument has help text; secrets in URLs and in TWINE_PASSWORD are never
printed. Also issue #9 item 2: pip and uv resolving a mix of snapshot and release wheels."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import FaultProxy, one_error_line, tally
from support.helpers import UV, make_venv, read_member, run_cli

CPU = "torch213-cxx11-cpu-x86_64-linux"


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
    (["--macos-version", "x"], {}, "--macos-version 'x' is not like 26.0"),
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


def test_check_exit_codes_as_documented(kernel_repo: Path, tmp_path: Path) -> None:
    """`kernel-wheels check --help`: 0 every wheel passed; 1 a wheel failed a check; 2 a
    usage error (bad option, a path that does not exist, a folder without wheels). A
    folder is checked wheel by wheel."""
    help_text = " ".join(run_cli("check", "--help").stdout.split())
    assert ("Exit status: 0 every wheel passed; 1 a wheel failed a check; 2 a usage error (bad option, a path "
            "that does not exist, a folder without wheels).") in help_text
    good = tmp_path / "good"
    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", good)
    wheels = sorted(good.glob("*.whl"))
    bad = tmp_path / "bad"
    bad.mkdir()
    broken = bad / wheels[0].name
    broken.write_bytes(wheels[0].read_bytes()[:-100])  # the end of the zip cut off
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.txt").write_text("no wheels here\n")
    expectations = [
        ([good], 0, [f"PASS {w.name}" for w in wheels], f"{len(wheels)} of {len(wheels)} wheels passed"),
        ([*wheels], 0, [f"PASS {w.name}" for w in wheels], f"{len(wheels)} of {len(wheels)} wheels passed"),
        ([broken], 1, [f"FAIL {broken.name}"], "0 of 1 wheels passed"),
        ([good, bad], 1, [f"PASS {w.name}" for w in wheels] + [f"FAIL {broken.name}"],
         f"{len(wheels)} of {len(wheels) + 1} wheels passed"),
        ([empty / "README.txt"], 1, ["FAIL README.txt"], "0 of 1 wheels passed"),
    ]
    for paths, code, verdicts, summary in expectations:
        proc = run_cli("check", *paths, check=False)
        assert proc.returncode == code, (paths, proc.stdout)
        assert [line for line in proc.stdout.splitlines() if not line.startswith("  ")] == verdicts
        assert proc.stderr.strip().splitlines()[-1] == summary
    for paths, message in (([tmp_path / "nowhere.whl"], f"{tmp_path / 'nowhere.whl'} does not exist"),
                           ([empty], f"{empty} is a folder with no .whl files"),
                           ):
        assert one_error_line(run_cli("check", *paths, check=False), 2) == message
    refused = run_cli("check", "--jobs", "-1", good, check=False)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1] == (
        "kernel-wheels check: error: argument -j/--jobs: -1: give 1 or more (leave it out for one per CPU)")
    tally("cli", inputs=len(expectations) + 3)


def test_check_accepts_directory_entries(kernel_repo: Path, tmp_path: Path) -> None:
    """`zip -r` writes an entry per folder; a wheel with them is valid."""
    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", tmp_path / "w", "--variant", CPU)
    wheel = next((tmp_path / "w").glob("*.whl"))
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    rezipped = tmp_path / "rezipped" / wheel.name
    rezipped.parent.mkdir()
    subprocess.run(["zip", "-qr", str(rezipped), "."], cwd=unpacked, check=True)
    with zipfile.ZipFile(rezipped) as zf:
        assert any(info.is_dir() for info in zf.infolist())
    assert run_cli("check", rezipped).stdout.startswith(f"PASS {wheel.name}")


@pytest.mark.parametrize("command", ["to-wheel", "check", "variants"])
def test_every_argument_has_help_text(command: str) -> None:
    from kernel_wheels.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
    missing = [a.dest for a in sub._actions if not a.help or not a.help.strip()]
    assert missing == []
    assert run_cli(command, "--help").stdout.count("examples:") == 1


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


def test_index_password_never_printed(tmp_path: Path, kernel_repo: Path) -> None:
    """TWINE_PASSWORD and a password in the upload URL, with --json, to a server that is
    down (tests/test_publish.py scans the real servers' answers)."""
    from support.helpers import free_port

    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", tmp_path / "w", "--variant", CPU)
    secret = "kwFakeIndexPassword-0987"
    port = free_port()
    for url, extra in ((f"http://127.0.0.1:{port}/", {"TWINE_USERNAME": "ci", "TWINE_PASSWORD": secret}),
                       (f"http://ci:{secret}@127.0.0.1:{port}/", {})):
        proc = run_cli("publish", tmp_path / "w", "--repository-url", url, "--json", "--no-keyring",
                       env=extra, check=False)
        assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["exit_code"] == 1
        assert secret not in proc.stdout + proc.stderr
    tally("cli", inputs=2)


# -- item 2: installers and snapshot versions -------------------------------------------
@pytest.fixture(scope="module")
def mixed_wheels(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Folders of CPU wheels: 1.1.1, 1.1.2, the snapshot of the later build on branch v1
    (1.1.2.post0.dev20260103000000), and 1.1.3 (a release tagged after it); and the same
    without 1.1.3."""
    work = tmp_path_factory.mktemp("mixed")
    clone = work / "img2gray"
    subprocess.run(["git", "clone", "-q", str(kernel_repo), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "branch", "v1", "origin/v1"], check=True)
    date = {"GIT_AUTHOR_DATE": "1767484800 +0000", "GIT_COMMITTER_DATE": "1767484800 +0000",  # 2026-01-04
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "v1"], check=True)
    (clone / "README.md").write_text("# img2gray\n\nRelease 1.1.3.\n")
    subprocess.run(["git", "-C", str(clone), "commit", "-qam", "1.1.3"], check=True, env={**os.environ, **date})
    subprocess.run(["git", "-C", str(clone), "tag", "v1.1.3"], check=True)
    every = work / "every"
    for version in ("1.1.1", "1.1.2", "1.1.3"):
        run_cli("to-wheel", clone, version, "-o", every, "--variant", CPU)
    run_cli("to-wheel", clone, "--revision", "v1~1", "-o", every, "--variant", CPU)  # the v1 build before 1.1.3
    names = sorted(p.name for p in every.iterdir())
    assert [n.split("-")[1] for n in names] == [
        "1.1.1+torch213cpucxx11", "1.1.2+torch213cpucxx11", "1.1.2.post0.dev20260103000000+torch213cpucxx11",
        "1.1.3+torch213cpucxx11"]
    before = work / "before-1.1.3"
    before.mkdir()
    for name in names[:3]:
        shutil.copy(every / name, before / name)
    return {"every": every, "before": before}


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_installers_take_releases_unless_asked_for_snapshots(installer: str, mixed_wheels: dict[str, Path],
                                                              tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    snapshot = "1.1.2.post0.dev20260103000000"
    pre = ["--pre"] if installer == "pip" else ["--prerelease", "allow"]
    cases = [  # (folder, requirement, extra arguments, the version installed)
        ("every", "img2gray", [], "1.1.3"),
        ("every", "img2gray", pre, "1.1.3"),  # a snapshot sorts before the next release
        ("every", "img2gray<1.1.3", [], "1.1.2"),
        ("every", "img2gray<1.1.3", pre, snapshot),
        ("every", f"img2gray=={snapshot}", [], snapshot),
        ("before", "img2gray", [], "1.1.2"),
        ("before", "img2gray", pre, snapshot),
    ]
    for folder, requirement, extra, version in cases:
        if installer == "pip":
            cmd = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall",
                   "--find-links", str(mixed_wheels[folder]), *extra, requirement]
        else:
            cmd = [UV, "pip", "install", "-q", "--python", str(python), "--no-deps", "--no-index", "--reinstall",
                   "--find-links", str(mixed_wheels[folder]), *extra, requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        installed = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('img2gray'))"],
                                   capture_output=True, text=True, check=True).stdout.strip()
        assert installed == f"{version}+torch213cpucxx11", (folder, requirement, extra)
    tally("cli", inputs=len(cases))

