"""`kernel-wheels to-wheel`: the contract on every variant form, installs with pip and
uv, twine, RECORD, reproducibility, atomic and idempotent output, errors; pip and uv take
releases before snapshot versions unless asked. The command's other tests:
test_to_wheel_options.py (options and environment), test_to_wheel_inputs.py (odd and hostile
source trees, metadata.json, versions), test_to_wheel_output.py (the output folder's faults,
signals), test_to_wheel_hub_faults.py (a faulty Hub)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.metadata import Metadata
from packaging.utils import parse_wheel_filename
from wheel.wheelfile import WheelFile

from kernel_wheels import __version__
from support.contract import CONTRACT, MATRIX
from support.faults import tally
from support.helpers import UV, make_venv, read_member, run_cli, torch_wheel

CPU_WHEEL = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
CUDA_WHEEL = "img2gray-1.1.2+torch214cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
CPU = "torch213-cxx11-cpu-x86_64-linux"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def repo_wheels(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("repo-wheels")
    proc = run_cli("to-wheel", kernel_repo, "1.1.2", cwd=out)  # old default: current folder
    assert proc.stderr.count("☸ ") == 2
    assert f"☸ {CPU_WHEEL}" in proc.stderr and f"☸ {CUDA_WHEEL}" in proc.stderr
    assert "done: 2 wheels" in proc.stderr
    return out


@pytest.fixture(scope="module")
def matrix_wheels(matrix_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("matrix-wheels")
    proc = run_cli("to-wheel", matrix_folder, "1.1.2", "-o", out, "--json")
    assert "skipping build/not-a-variant" in proc.stderr
    result = json.loads(proc.stdout)
    assert result["skipped"][0]["folder"] == "not-a-variant"
    assert len(result["wheels"]) == len(MATRIX)
    return out


def test_sample_wheel_names(repo_wheels: Path) -> None:
    assert sorted(p.name for p in repo_wheels.iterdir()) == sorted([CPU_WHEEL, CUDA_WHEEL])


def test_sample_metadata(repo_wheels: Path) -> None:
    text = read_member(repo_wheels / CPU_WHEEL, ".dist-info/METADATA")
    assert text.startswith("Metadata-Version: 2.4\nName: img2gray\nVersion: 1.1.2+torch213cpucxx11\n")
    meta = Metadata.from_email(text, validate=True)
    assert meta.license_expression == "Apache-2.0"
    assert [str(r) for r in meta.requires_dist or []] == ["torch==2.13.*"]
    assert str(meta.requires_python) == ">=3.9"
    assert meta.description and meta.description.startswith("# img2gray")
    assert "Release 1.1.2." in meta.description and "license:" not in meta.description
    assert meta.description_content_type == "text/markdown"
    wheel = read_member(repo_wheels / CPU_WHEEL, ".dist-info/WHEEL")
    assert wheel.splitlines() == ["Wheel-Version: 1.0", f"Generator: kernel-wheels {__version__}",
                                  "Root-Is-Purelib: false", "Tag: cp39-abi3-manylinux_2_28_x86_64"]


def test_sample_provenance(repo_wheels: Path, kernel_repo: Path) -> None:
    record = json.loads(read_member(repo_wheels / CUDA_WHEEL, ".dist-info/kernel_wheels.json"))
    commit = subprocess.run(["git", "-C", str(kernel_repo), "rev-parse", "v1.1.2^{commit}"],
                            capture_output=True, text=True).stdout.strip()
    assert record["commit"] == commit and record["release"] == "v1.1.2"
    assert record["source"] is None  # a local repository without a remote: no path recorded
    assert "requested" not in record and "ref" not in record
    assert record["variant"]["name"] == "torch214-cxx11-cu130-x86_64-linux"
    assert record["backend"] == "cuda" and record["archs"] == ["8.0", "9.0+PTX"]
    assert record["metadata_json"]["id"].startswith("_img2gray_cuda_")
    assert record["layout"] == "flat"


def test_wheel_contents_are_the_variant_files(repo_wheels: Path, cpu_build: Path) -> None:
    variant = cpu_build.name
    with zipfile.ZipFile(repo_wheels / CPU_WHEEL) as zf:
        package = sorted(n for n in zf.namelist() if n.startswith("img2gray/"))
        # the variant folder whole and unchanged (compatibility sub-package and metadata.json
        # included), the loader and the import guard beside it
        on_disk = sorted(p.relative_to(cpu_build).as_posix() for p in cpu_build.rglob("*") if p.is_file())
        assert package == sorted([*(f"img2gray/{variant}/{name}" for name in on_disk),
                                  "img2gray/__init__.py", "img2gray/_kernel_wheels_guard.py"])
        for name in on_disk:
            assert zf.read(f"img2gray/{variant}/{name}") == (cpu_build / name).read_bytes(), name
        record = json.loads(zf.read(next(n for n in zf.namelist() if n.endswith("kernel_wheels.json"))))
        assert record["wheel_layout"] == 2 and record["variant_folder"] == f"img2gray/{variant}"
        assert record["added_by_kernel_wheels"] == {"loader": "img2gray/__init__.py",
                                                    "import_guard": "img2gray/_kernel_wheels_guard.py"}
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
        so = next(cpu_build.glob("*.so")).name
        assert modes[f"img2gray/{variant}/{so}"] == 0o755 and modes["img2gray/__init__.py"] == 0o644


@pytest.mark.parametrize("variant", sorted(MATRIX))
def test_matrix_row(matrix_wheels: Path, variant: str) -> None:
    filename, torch_req = CONTRACT[variant]
    wheel = matrix_wheels / filename
    assert wheel.is_file(), sorted(p.name for p in matrix_wheels.iterdir())
    name, version, _, tags = parse_wheel_filename(filename)
    meta = Metadata.from_email(read_member(wheel, ".dist-info/METADATA"), validate=True)
    assert meta.metadata_version == "2.4" and str(meta.version) == str(version)
    requires = [str(r) for r in meta.requires_dist or []]
    assert requires[0] == torch_req
    assert ("einops" in requires) == (variant == "torch-cuda")
    assert meta.license_expression == "Apache-2.0"  # metadata.json's or the card's apache-2.0
    wheel_file = read_member(wheel, ".dist-info/WHEEL").splitlines()
    purelib = variant in ("torch-cuda", "torch-universal")
    assert f"Root-Is-Purelib: {str(purelib).lower()}" in wheel_file
    assert [line[5:] for line in wheel_file if line.startswith("Tag: ")] == [str(t) for t in tags]
    layout, _ = MATRIX[variant]
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "img2gray/__init__.py" in names  # the loader
        kernel_init = f"img2gray/{variant}/__init__.py" if layout == "flat" else \
            f"img2gray/{variant}/img2gray/__init__.py"
        assert kernel_init in names
        record = list(csv.reader(io.StringIO(zf.read(next(n for n in names if n.endswith("RECORD"))).decode())))
    assert sorted(row[0] for row in record) == sorted(names)
    for row in record:
        if not row[0].endswith("RECORD"):
            assert row[1].startswith("sha256=") and int(row[2]) >= 0
    provenance = json.loads(read_member(wheel, ".dist-info/kernel_wheels.json"))
    assert provenance["layout"] == layout and provenance["variant"]["name"] == variant


def test_every_record_hash_verifies(matrix_wheels: Path, repo_wheels: Path) -> None:
    wheels = [*matrix_wheels.glob("*.whl"), *repo_wheels.glob("*.whl")]
    assert len(wheels) == len(MATRIX) + 2
    for wheel in wheels:
        with WheelFile(wheel) as wf:  # raises on a hash mismatch while reading
            for info in wf.infolist():
                wf.read(info)
        _, version, _, _ = parse_wheel_filename(wheel.name)
        meta = Metadata.from_email(read_member(wheel, ".dist-info/METADATA"), validate=True)
        assert str(meta.version) == str(version)


def test_twine_check_strict(matrix_wheels: Path, repo_wheels: Path) -> None:
    wheels = sorted(map(str, [*matrix_wheels.glob("*.whl"), *repo_wheels.glob("*.whl")]))
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *wheels],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == len(wheels)


@pytest.fixture(scope="module")
def torch_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return torch_wheel(tmp_path_factory.mktemp("torch-wheel"))


RUN_OP = """
import sys, torch, img2gray
sys.path.insert(0, sys.argv[1])
from support.gray import reference_gray
for shape in [(7, 11), (64, 129), (333, 1)]:
    image = torch.randint(0, 256, (*shape, 3), dtype=torch.uint8)
    assert torch.equal(img2gray.img2gray(image), reference_gray(image)), shape
print(img2gray.__file__)
"""


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_cpu_wheel_installs_and_runs(installer: str, repo_wheels: Path, torch_file: Path,
                                     tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv", torch=torch_file)
    wheel = str(repo_wheels / CPU_WHEEL)
    if installer == "pip":
        cmd = [str(python), "-m", "pip", "install", "-q", "--no-index", wheel]
    else:
        cmd = [UV, "pip", "install", "-q", "--offline", "--python", str(python), wheel]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = subprocess.run([str(python), "-c", RUN_OP, str(Path(__file__).parent)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "site-packages/img2gray/torch213-cxx11-cpu-x86_64-linux/__init__.py" in run.stdout
    torch_version = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    assert torch_version == "2.13.0+cpu"  # the install did not replace the user's torch


def test_linux_and_noarch_matrix_wheels_install_and_import(matrix_wheels: Path, tmp_path: Path) -> None:
    wheels = [w for w in sorted(matrix_wheels.glob("*.whl"))
              if w.name.endswith(("manylinux_2_28_x86_64.whl", "none-any.whl"))]
    assert len(wheels) == 9  # 7 Linux x86-64 rows and 2 noarch rows
    for index, wheel in enumerate(wheels):
        python = make_venv(tmp_path / f"v{index}")
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps",
                               "--no-index", str(wheel)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        variant = json.loads(read_member(wheel, ".dist-info/kernel_wheels.json"))["variant"]["name"]
        # No torch here: the import guard (tested in test_guard.py) is skipped.
        out = subprocess.run([str(python), "-c", "import img2gray, img2gray._ops; print(img2gray.VARIANT)"],
                             capture_output=True, text=True, cwd=tmp_path,
                             env={**os.environ, "KERNEL_WHEELS_SKIP_GUARD": "1"})
        assert out.stdout.strip() == variant, out.stderr


def _convert(source: Path, out: Path, *extra: str, umask: int = 0o022,
             prefix: list[str] | None = None, env: dict[str, str] | None = None) -> list[Path]:
    old = os.umask(umask)
    try:
        run_cli("to-wheel", source, "1.1.2", "-o", out, *extra, prefix=prefix, env=env)
    finally:
        os.umask(old)
    return sorted(out.glob("*.whl"))


def test_reproducible_across_umask_clock_and_mtimes(kernel_repo: Path, matrix_folder: Path,
                                                     tmp_path: Path) -> None:
    faketime = shutil.which("faketime")
    assert faketime, "faketime is needed (apt-get install faketime; .ci/run installs it)"
    first = _convert(kernel_repo, tmp_path / "a1", "-j", "1") + \
        _convert(matrix_folder, tmp_path / "a2", "-j", "1")
    for path in matrix_folder.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))  # the source files' times change
    # Another clock (running from 2031), time zone, umask and number of worker processes.
    clock = [faketime, "-f", "@2031-05-06 07:08:09"]
    env = {"TZ": "Asia/Tokyo", "DONT_FAKE_MONOTONIC": "1"}
    second = _convert(kernel_repo, tmp_path / "b1", "-j", "3", umask=0o077, prefix=clock, env=env)
    second += _convert(matrix_folder, tmp_path / "b2", "-j", "3", umask=0o077, prefix=clock, env=env)
    assert [p.name for p in first] == [p.name for p in second] and len(first) == 2 + len(MATRIX)
    for a, b in zip(first, second, strict=True):
        assert sha256(a) == sha256(b), a.name


def test_timestamps_follow_commit_or_source_date_epoch(repo_wheels: Path, kernel_repo: Path,
                                                       tmp_path: Path) -> None:
    with zipfile.ZipFile(repo_wheels / CPU_WHEEL) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2026, 1, 2, 0, 0, 0)}  # tag v1.1.2's commit
    out = _convert(kernel_repo, tmp_path, "--variant", "*cpu*", env={"SOURCE_DATE_EPOCH": "1700000000"})
    with zipfile.ZipFile(out[0]) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2023, 11, 14, 22, 13, 20)}


def test_idempotent_and_atomic_output(kernel_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "wheels"
    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", out, "--variant", "*cpu*")
    wheel = out / CPU_WHEEL
    before = sha256(wheel)
    again = run_cli("to-wheel", kernel_repo, "1.1.2", "-o", out, "--variant", "*cpu*", "--json")
    assert json.loads(again.stdout)["wheels"][0]["status"] == "unchanged"
    wheel.write_bytes(b"someone else's wheel")
    clash = run_cli("to-wheel", kernel_repo, "1.1.2", "-o", out, "--variant", "*cpu*", check=False)
    assert clash.returncode == 1
    assert "exists with different content (use --force to replace it)" in clash.stderr
    assert wheel.read_bytes() == b"someone else's wheel"
    forced = run_cli("to-wheel", kernel_repo, "1.1.2", "-o", out, "--variant", "*cpu*", "--force", "--json")
    assert json.loads(forced.stdout)["wheels"][0]["status"] == "replaced"
    assert sha256(wheel) == before
    assert sorted(p.name for p in out.iterdir()) == [CPU_WHEEL]  # no temp files left


def test_failing_wheel_is_not_written(matrix_folder: Path, foreign_binaries: dict[str, Path],
                                      tmp_path: Path) -> None:
    source = tmp_path / "img2gray"
    variant = source / "build" / "torch213-cxx11-cpu-x86_64-linux"
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text("")
    shutil.copy(foreign_binaries["linux-aarch64"], variant / "_img2gray_x.abi3.so")
    out = tmp_path / "out"
    proc = run_cli("to-wheel", source, "1.0.0", "-o", out, check=False)
    assert proc.returncode == 1
    assert "failed its checks and was not written" in proc.stderr
    assert "_img2gray_x.abi3.so is AARCH64 but the wheel is tagged x86_64" in proc.stderr
    assert not out.exists()  # the run made it, and failing, removed it: no trace
    skipped = run_cli("to-wheel", source, "1.0.0", "-o", out, "--no-check")
    assert "WITHOUT checking" in skipped.stderr and len(list(out.iterdir())) == 1


def test_dist_name_keeps_import_name(kernel_repo: Path, tmp_path: Path) -> None:
    out = _convert(kernel_repo, tmp_path, "--variant", "*cpu*", "--dist-name", "acme-img2gray")
    assert out[0].name == "acme_img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(out[0]) as zf:
        assert "img2gray/__init__.py" in zf.namelist()
    assert "Name: acme-img2gray" in read_member(out[0], "METADATA")


def test_selection_errors_list_what_exists(kernel_repo: Path, tmp_path: Path) -> None:
    proc = run_cli("to-wheel", kernel_repo, "1.1.2", "-o", tmp_path, "--variant", "torch99-*", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith(
        "variants that exist: torch213-cxx11-cpu-x86_64-linux, torch214-cxx11-cu130-x86_64-linux")
    lines = proc.stderr.strip().splitlines()  # the pinned commit, then one error line
    assert len(lines) == 2 and lines[1].startswith("kernel-wheels: error: the filters select no variant")
    proc = run_cli("to-wheel", kernel_repo, "9.9.9", "-o", tmp_path, check=False)
    assert proc.returncode == 1
    assert "version 9.9.9 not found; versions that exist: 1.1.1, 1.1.2, 1 (branch v1)" in proc.stderr
    proc = run_cli("to-wheel", tmp_path / "nowhere", "1.0", check=False)
    assert proc.returncode == 2 and "is not an existing folder, a git URL or a Hub repository id" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("to-wheel", empty, "1.0", check=False)
    assert proc.returncode == 1 and "has no build/ folder and no variant folders" in proc.stderr
    assert list(tmp_path.glob("*.whl")) == []


def test_unknown_python_depends_is_an_error(cpu_build: Path, tmp_path: Path) -> None:
    variant = tmp_path / "k" / "build" / cpu_build.name
    shutil.copytree(cpu_build, variant)
    meta = json.loads((variant / "metadata.json").read_text())
    meta["python-depends"] = ["left-pad"]
    (variant / "metadata.json").write_text(json.dumps(meta))
    proc = run_cli("to-wheel", tmp_path / "k", "1.0", "-o", tmp_path / "out", check=False)
    assert proc.returncode == 1
    assert "unknown python-depends 'left-pad' for backend cpu" in proc.stderr


def test_a_licence_that_is_not_spdx_is_the_license_field(cpu_build: Path, tmp_path: Path) -> None:
    """The Hub's 'other' is no SPDX expression: it is kept as License (#38.5)."""
    variant = tmp_path / "k" / "build" / cpu_build.name
    shutil.copytree(cpu_build, variant)
    meta = json.loads((variant / "metadata.json").read_text())
    meta["license"] = "other"
    (variant / "metadata.json").write_text(json.dumps(meta))
    run_cli("to-wheel", tmp_path / "k", "1.0", "-o", tmp_path / "out")
    metadata = read_member(next((tmp_path / "out").glob("*.whl")), "METADATA")
    assert "License: other" in metadata.splitlines() and "License-Expression" not in metadata


def test_python_api(kernel_repo: Path, tmp_path: Path) -> None:
    from kernel_wheels import ConvertOptions, VariantFilter, open_source, parse_request, to_wheels

    result = to_wheels(open_source(str(kernel_repo)), parse_request("1.1.2"),
                       ConvertOptions(output_dir=tmp_path, filters=VariantFilter(backends=("cpu",))))
    assert [w.path.name for w in result.wheels] == [CPU_WHEEL]
    assert result.revision.ref == "v1.1.2" and result.version == "1.1.2"
    assert result.wheels[0].check is not None and result.wheels[0].check.passed


def test_unwritable_output_is_one_line(kernel_repo: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc = run_cli("to-wheel", kernel_repo, "1.1.2", "-o", blocker / "wheels", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr  # a usage error (issue #33)
    assert proc.stderr.strip().splitlines() == [
        f"kernel-wheels: error: cannot write wheels to {blocker / 'wheels'}: {blocker} is a file, not a folder"]


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
