"""`kernel-wheels check`: every promise a wheel's name makes, each with a real binary; its
exit codes as its help documents them; a wheel with directory entries (`zip -r`) passes."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import zipfile
from base64 import urlsafe_b64encode
from pathlib import Path

import pytest

from kernel_wheels.checks import judge_wheel as check_wheel
from support.faults import one_error_line, tally
from support.helpers import run_cli

CPU_WHEEL = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
LINUX_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
CPU = LINUX_VARIANT


@pytest.fixture(scope="module")
def sample_wheels(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("sample-wheels")
    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", out)
    return sorted(out.glob("*.whl"))


def wheel_of(binary: Path, tmp: Path, variant: str = LINUX_VARIANT, *extra: str) -> Path:
    """Pack one binary as a variant's extension module, unchecked, to check it after."""
    folder = tmp / "img2gray" / "build" / variant
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    shutil.copy(binary, folder / binary.name)
    run_cli("to-wheel", tmp / "img2gray", "1.0.0", "-o", tmp / "out", "--no-check", *extra)
    return next((tmp / "out").glob("*.whl"))


def check_cli(wheel: Path) -> tuple[int, str]:
    proc = run_cli("check", wheel, check=False)
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout


def rewrite(wheel: Path, target: Path, changes: dict[str, bytes], *, update_record: bool) -> Path:
    """Copy a wheel, replacing members; RECORD is updated only if asked."""
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(src.read(record_name).decode())))
        for info in src.infolist():
            data = changes.get(info.filename, src.read(info.filename))
            if info.filename == record_name:
                continue
            dst.writestr(info, data)
        if update_record:
            for row in rows:
                if row[0] in changes:
                    digest = urlsafe_b64encode(hashlib.sha256(changes[row[0]]).digest()).rstrip(b"=")
                    row[1], row[2] = "sha256=" + digest.decode(), str(len(changes[row[0]]))
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(rows)
        dst.writestr(record_name, buffer.getvalue())
    return target


def test_sample_wheels_pass(sample_wheels: list[Path]) -> None:
    assert len(sample_wheels) == 2
    proc = run_cli("check", "--json", *sample_wheels)
    reports = json.loads(proc.stdout)
    assert [r["passed"] for r in reports] == [True, True]
    for report in reports:
        checks = {f["check"] for f in report["findings"] if f["status"] == "pass"}
        assert checks >= {"record", "metadata", "wheel", "digest", "manylinux", "abi3"}
        # The sample kernel's builds are unsigned: a fact check reports, not a failure
        # (docs/provenance.md); everything else passes.
        assert [f for f in report["findings"] if f["status"] != "pass"] == [
            {"check": "provenance", "status": "not verified",
             "message": f"img2gray build/{_variant(report)}: "
                        "unsigned (no metadata.json.sigstore)"}]
    assert "2 of 2 wheels passed" in proc.stderr


def _variant(report: dict[str, object]) -> str:
    """The variant folder a sample wheel carries (torch213 CPU or torch214 CUDA)."""
    return ("torch213-cxx11-cpu-x86_64-linux" if "cpu" in str(report["wheel"])
            else "torch214-cxx11-cu130-x86_64-linux")


def _auditwheel_show_policy(wheel: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)],
                          capture_output=True, text=True)
    match = re.search(r'constrains the platform tag to\s+"([^"]+)"', " ".join(proc.stdout.split()))
    assert match, proc.stdout
    return match[1]


def test_verdict_agrees_with_auditwheel_show_and_kernel_abi_check(
        sample_wheels: list[Path], bad_binaries: dict[str, Path], tmp_path: Path) -> None:
    from kernel_abi_check import ObjectFile

    plain = wheel_of(bad_binaries["plain"], tmp_path)
    for wheel in [*sample_wheels, plain]:
        report = check_wheel(wheel)
        assert report.honest_manylinux == _auditwheel_show_policy(wheel)
        with zipfile.ZipFile(wheel) as zf:
            for name in (n for n in zf.namelist() if n.endswith(".so")):
                so = tmp_path / Path(name).name
                so.write_bytes(zf.read(name))
                obj = ObjectFile(str(so))
                ours_ok = not [f for f in report.failures if f.check == "manylinux"]
                assert (obj.check_manylinux("manylinux_2_28") == []) == ours_ok, wheel.name
                assert obj.check_python_abi("3.9") == []
    assert not check_wheel(plain).passed


def test_glibc_232_symbol_is_named_and_auto_finds_2_34(bad_binaries: dict[str, Path],
                                                       tmp_path: Path) -> None:
    wheel = wheel_of(bad_binaries["plain"], tmp_path)
    code, out = check_cli(wheel)
    assert code == 1
    assert ("tagged manylinux_2_28_x86_64 but the binaries need manylinux_2_34_x86_64: "
            "GLIBC_2.32: __libc_single_threaded in img2gray/torch213-cxx11-cpu-x86_64-linux/_plain_ext.abi3.so") in out
    # to-wheel refuses to write it, and names the honest tag
    source = tmp_path / "img2gray"
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "checked", check=False)
    assert proc.returncode == 1
    assert "the binaries honestly meet manylinux_2_34_x86_64: use --manylinux-version auto" in proc.stderr
    assert not (tmp_path / "checked").exists() or not list((tmp_path / "checked").iterdir())
    auto = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "auto", "--manylinux-version", "auto")
    assert "☸ img2gray-1.0.0+torch213cpucxx11-cp39-abi3-manylinux_2_34_x86_64.whl" in auto.stderr
    assert check_cli(next((tmp_path / "auto").glob("*.whl")))[0] == 0


def test_auto_lowers_the_tag_of_the_sample(kernel_repo: Path, tmp_path: Path) -> None:
    proc = run_cli("to-wheel", kernel_repo, "1.1.2", "-o", tmp_path, "--variant", "*cpu*",
                   "--manylinux-version", "auto")
    assert "☸ img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_24_x86_64.whl" in proc.stderr


def test_pybind11_and_libtorch_python_fail(bad_binaries: dict[str, Path], tmp_path: Path) -> None:
    code, out = check_cli(wheel_of(bad_binaries["pybind11"], tmp_path))
    assert code == 1
    assert "img2gray/torch213-cxx11-cpu-x86_64-linux/_pyb_ext.abi3.so links libtorch_python.so: libtorch_python ties the kernel" in out
    assert re.search(r"_pyb_ext\.abi3\.so uses Py\w+, which is not in the stable ABI", out)


def test_limited_api_310_in_cp39_wheel_fails(bad_binaries: dict[str, Path], tmp_path: Path) -> None:
    wheel = wheel_of(bad_binaries["api310"], tmp_path)
    code, out = check_cli(wheel)
    assert code == 1
    assert "_api310_ext.abi3.so needs the Python 3.10 limited API but the wheel is tagged for 3.9" in out
    tagged_310 = wheel_of(bad_binaries["api310"], tmp_path / "310", LINUX_VARIANT,
                          "--python-version", "3.10")
    assert tagged_310.name.endswith("-cp310-abi3-manylinux_2_28_x86_64.whl")
    assert check_cli(tagged_310)[0] == 0


def test_aarch64_binary_in_x86_64_wheel_fails(foreign_binaries: dict[str, Path], tmp_path: Path) -> None:
    code, out = check_cli(wheel_of(foreign_binaries["linux-aarch64"], tmp_path))
    assert code == 1
    assert "img2gray/torch213-cxx11-cpu-x86_64-linux/ext_aarch64.so is AARCH64 but the wheel is tagged x86_64" in out


def test_member_changed_after_record_fails(sample_wheels: list[Path], tmp_path: Path) -> None:
    wheel = next(w for w in sample_wheels if w.name == CPU_WHEEL)
    tampered = rewrite(wheel, tmp_path / CPU_WHEEL, {f"img2gray/{LINUX_VARIANT}/_ops.py": b"import os\n"},
                       update_record=False)
    code, out = check_cli(tampered)
    assert code == 1
    assert "img2gray/torch213-cxx11-cpu-x86_64-linux/_ops.py: its sha256 differs from RECORD's" in out


def test_file_differing_from_metadata_digest_fails(sample_wheels: list[Path], tmp_path: Path) -> None:
    """RECORD rewritten to match, so only metadata.json's digest can tell."""
    wheel = next(w for w in sample_wheels if w.name == CPU_WHEEL)
    tampered = rewrite(wheel, tmp_path / CPU_WHEEL, {f"img2gray/{LINUX_VARIANT}/_ops.py": b"import os\n"},
                       update_record=True)
    code, out = check_cli(tampered)
    assert code == 1
    assert "[digest] img2gray/torch213-cxx11-cpu-x86_64-linux/_ops.py differs from its metadata.json digest" in out
    assert "[record]" not in out


def test_tampered_variant_folder_is_refused_by_to_wheel(cpu_build: Path, tmp_path: Path) -> None:
    variant = tmp_path / "img2gray" / "build" / cpu_build.name
    shutil.copytree(cpu_build, variant)
    (variant / "_ops.py").write_text((variant / "_ops.py").read_text() + "# changed\n")
    proc = run_cli("to-wheel", tmp_path / "img2gray", "1.0.0", "-o", tmp_path / "out", check=False)
    assert proc.returncode == 1
    assert "img2gray/torch213-cxx11-cpu-x86_64-linux/_ops.py differs from its metadata.json digest" in proc.stderr


def test_metadata_version_differing_from_file_name_fails(sample_wheels: list[Path], tmp_path: Path) -> None:
    wheel = next(w for w in sample_wheels if w.name == CPU_WHEEL)
    metadata_name = "img2gray-1.1.2+torch213cpucxx11.dist-info/METADATA"
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read(metadata_name).decode()
    changed = metadata.replace("Version: 1.1.2+torch213cpucxx11", "Version: 1.1.3+torch213cpucxx11")
    tampered = rewrite(wheel, tmp_path / CPU_WHEEL, {metadata_name: changed.encode()},
                       update_record=True)
    code, out = check_cli(tampered)
    assert code == 1
    assert "METADATA version 1.1.3+torch213cpucxx11 differs from the file name's 1.1.2+torch213cpucxx11" in out


def test_wheel_tags_must_match_file_name(sample_wheels: list[Path], tmp_path: Path) -> None:
    wheel = next(w for w in sample_wheels if w.name == CPU_WHEEL)
    renamed = tmp_path / CPU_WHEEL.replace("manylinux_2_28", "manylinux_2_17")
    shutil.copy(wheel, renamed)
    code, out = check_cli(renamed)
    assert code == 1 and "WHEEL tags" in out


def test_macos_and_windows_binaries(foreign_binaries: dict[str, Path], tmp_path: Path) -> None:
    ok = wheel_of(foreign_binaries["macos-26"], tmp_path / "a", "torch213-metal-aarch64-darwin")
    report = check_wheel(ok)
    assert report.passed
    assert any(f.check == "macho" and f.status.value == "pass" and "macOS 26.0" in f.message
               for f in report.findings)
    assert any(f.status.value == "not verified" for f in report.findings)
    old_tag = wheel_of(foreign_binaries["macos-26"], tmp_path / "b", "torch213-metal-aarch64-darwin",
                       "--macos-version", "15.0")
    code, out = check_cli(old_tag)
    assert code == 1 and "needs macOS 26.0 but the wheel is tagged macosx_15_0_arm64" in out
    x86 = wheel_of(foreign_binaries["macos-x86"], tmp_path / "c", "torch213-metal-aarch64-darwin")
    code, out = check_cli(x86)
    assert code == 1 and "not arm64" in out
    win = check_wheel(wheel_of(foreign_binaries["windows"], tmp_path / "d", "torch213-cu130-x86_64-windows"))
    assert win.passed and any(f.check == "pe" and f.status.value == "pass" for f in win.findings)
    assert any(f.check == "pe" and f.status.value == "not verified" for f in win.findings)
    elf_in_mac = wheel_of(foreign_binaries["linux-aarch64"], tmp_path / "e", "torch213-metal-aarch64-darwin")
    code, out = check_cli(elf_in_mac)
    assert code == 1 and "is a Linux ELF file in a wheel for macosx_26_0_arm64" in out


def test_check_usage_errors(tmp_path: Path) -> None:
    proc = run_cli("check", check=False)
    assert proc.returncode == 2
    missing = run_cli("check", tmp_path / "nope.whl", check=False)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr == f"kernel-wheels: error: {tmp_path / 'nope.whl'} does not exist\n"
    as_json = run_cli("check", "--json", tmp_path / "nope.whl", check=False)
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"]["message"].endswith("nope.whl does not exist")
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("check", empty, check=False)
    assert proc.returncode == 2 and "is a folder with no .whl files" in proc.stderr
    junk = tmp_path / "junk-1.0-py3-none-any.whl"
    junk.write_bytes(b"not a zip")
    proc = run_cli("check", junk, check=False)
    assert proc.returncode == 1 and "unreadable wheel" in proc.stdout and "Traceback" not in proc.stderr
    proc = run_cli("check", tmp_path, check=False)  # a folder: its wheels are checked
    assert proc.returncode == 1 and "FAIL junk-1.0-py3-none-any.whl" in proc.stdout


def test_rpath_outside_the_wheel_fails(bad_binaries: dict[str, Path], tmp_path: Path) -> None:
    code, out = check_cli(wheel_of(bad_binaries["rpath"], tmp_path))
    assert code == 1
    assert "img2gray/torch213-cxx11-cpu-x86_64-linux/_rpath_ext.abi3.so has RPATH/RUNPATH /opt/build/lib, which points outside the wheel" in out


def test_extension_without_pyinit_fails(bad_binaries: dict[str, Path], tmp_path: Path) -> None:
    code, out = check_cli(wheel_of(bad_binaries["noinit"], tmp_path))
    assert code == 1
    assert "img2gray/torch213-cxx11-cpu-x86_64-linux/_noinit.abi3.so is an extension module without PyInit__noinit" in out
    assert "RPATH" not in out  # $ORIGIN/../img2gray.libs stays inside the wheel


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
