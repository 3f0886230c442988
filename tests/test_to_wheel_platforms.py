"""Per-build platform tags (#38 point 1): `--macos-version auto` (the default) tags each
macOS build with the version its own binaries need, never below what its backend needs,
as kernel-builder builds them (CPU and tvm-ffi for macOS 15.0, Metal for 26.0); an explicit
version still wins. Windows builds get `win_amd64` / `win_arm64` from their PE machine.
The binaries are real: cross-built with zig (tests/conftest.py's `foreign_binaries`), and
what an installer accepts on a given macOS is packaging's own tag logic."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from packaging.tags import Tag, cpython_tags, mac_platforms
from packaging.utils import parse_wheel_filename

from kernel_wheels.checks import judge_wheel as check_wheel
from kernel_wheels.kernel.variants import parse_variant
from kernel_wheels.wheel.plan import TagOptions, plan_wheel
from support.contract import CONTRACT
from support.faults import one_error_line
from support.helpers import ROOT, read_member, run_cli

CPU_MAC = "torch213-cpu-aarch64-darwin"
METAL = "torch213-metal-aarch64-darwin"
TVM_CPU_MAC = "tvm-ffi01-cpu-aarch64-darwin"
WIN_X86 = "torch213-cu130-x86_64-windows"
WIN_ARM = "torch213-cu130-aarch64-windows"


def add_variant(root: Path, name: str, binary: Path | None) -> None:
    """``root/build/<name>/`` in the flat layout, with ``binary`` as its extension module
    and a metadata.json that digests every file (as kernel-builder writes one)."""
    from kernel_wheels.kernel.digest import digest_folder

    folder = root / "build" / name
    (folder / "img2gray").mkdir(parents=True)
    (folder / "__init__.py").write_text(f'VARIANT = "{name}"\n')
    (folder / "_ops.py").write_text("ops = None\n")
    (folder / "img2gray" / "__init__.py").write_text("from .. import *\n")
    if binary is not None:
        suffix = ".pyd" if name.endswith("windows") else ".abi3.so"
        shutil.copy(binary, folder / f"_img2gray_x{suffix}")
    meta = {"name": "img2gray", "id": "_img2gray_x", "version": 1, "license": "apache-2.0",
            "python-depends": [], "backend": {"type": parse_variant(name).backend},
            "digest": {"algorithm": "sha256", "files": digest_folder(folder)}}
    (folder / "metadata.json").write_text(json.dumps(meta))


def kernel(tmp: Path, builds: dict[str, Path | None]) -> Path:
    root = tmp / "img2gray"
    for name, binary in builds.items():
        add_variant(root, name, binary)
    return root


def convert(root: Path, out: Path, *args: str) -> list[str]:
    """The wheel file names `to-wheel` writes (it checks each one before writing it)."""
    proc = run_cli("to-wheel", root, "1.1.2", "-o", out, "--json", *args)
    return sorted(Path(w["path"]).name for w in json.loads(proc.stdout)["wheels"])


def platform_of(filename: str) -> str:
    (tag,) = parse_wheel_filename(filename)[3]
    return tag.platform


def installable_on(filename: str, macos: tuple[int, int]) -> bool:
    """Whether pip on an arm64 Mac running ``macos`` (CPython 3.11) takes the wheel:
    packaging's own list of the tags that interpreter supports."""
    supported = set(cpython_tags((3, 11), ["cp311"], mac_platforms(macos, "arm64")))
    return bool(set(parse_wheel_filename(filename)[3]) & supported)


def passes_check(*wheels: Path) -> None:
    """`kernel-wheels check` passes every one of ``wheels`` (one run for all)."""
    proc = run_cli("check", *wheels, check=False)
    assert proc.returncode == 0, proc.stdout
    assert proc.stderr.strip().endswith(f"{len(wheels)} of {len(wheels)} wheels passed"), proc.stderr


# --- macOS -------------------------------------------------------------------------------


def test_cpu_and_metal_builds_of_one_run_get_their_own_macos_tags(
        foreign_binaries: dict[str, Path], tmp_path: Path) -> None:
    """kernel-builder's CPU build (15.0) and Metal build (26.0) in one run: each wheel is
    tagged with its own version and passes check; pip on macOS 15 takes the CPU wheel and
    not the Metal one (the `kernels` loader would refuse it there); macOS 26 takes both.
    Before: both tagged macosx_26_0, so macOS 15-25 took neither."""
    root = kernel(tmp_path, {CPU_MAC: foreign_binaries["macos-15"], METAL: foreign_binaries["macos-26"],
                             TVM_CPU_MAC: foreign_binaries["macos-15"], "torch-metal": None})
    names = convert(root, tmp_path / "out")
    assert names == ["img2gray-1.1.2+metal-py3-none-any.whl",  # noarch: unchanged
                     "img2gray-1.1.2+torch213cpu-cp39-abi3-macosx_15_0_arm64.whl",
                     "img2gray-1.1.2+torch213metal-cp39-abi3-macosx_26_0_arm64.whl",
                     "img2gray-1.1.2+tvmffi01cpu-cp39-abi3-macosx_15_0_arm64.whl"]
    assert names[1:] == sorted(CONTRACT[n][0] for n in (CPU_MAC, METAL, TVM_CPU_MAC))
    cpu, metal = names[1], names[2]
    passes_check(*(tmp_path / "out" / name for name in names))
    for name in names:
        assert read_member(tmp_path / "out" / name, ".dist-info/WHEEL").count("Tag: ") == 1
    assert "Tag: cp39-abi3-macosx_15_0_arm64" in read_member(tmp_path / "out" / cpu, ".dist-info/WHEEL")
    report = check_wheel(tmp_path / "out" / cpu)
    assert any(f.check == "macho" and f.status.value == "pass" and "macOS 15.0 <= tag" in f.message
               for f in report.findings)
    for macos in ((15, 0), (15, 7)):
        assert installable_on(cpu, macos) and not installable_on(metal, macos)
    assert installable_on(cpu, (26, 0)) and installable_on(metal, (26, 0))
    assert not installable_on(cpu, (14, 6))


def test_the_tag_follows_what_the_binaries_need(foreign_binaries: dict[str, Path],
                                                tmp_path: Path) -> None:
    """A CPU build is tagged with the highest minimum its binaries record, lower (14.0)
    or higher (26.0) than kernel-builder's 15.0; a minimum with a minor version (15.4)
    takes the next release's tag, since from macOS 11 on a tag names a major release
    (pip never installs a macosx_15_4 wheel, and macosx_15_0 would let 15.0-15.3 install
    a binary they cannot load)."""
    cases = {"macos-14": "macosx_14_0_arm64", "macos-26": "macosx_26_0_arm64",
             "macos-15.4": "macosx_16_0_arm64"}
    made = []
    for key, platform in cases.items():
        root = kernel(tmp_path / key, {CPU_MAC: foreign_binaries[key]})
        (name,) = convert(root, tmp_path / key / "out")
        assert platform_of(name) == platform, key
        made.append(tmp_path / key / "out" / name)
    passes_check(*made)
    assert Tag("cp39", "abi3", "macosx_15_4_arm64") not in set(
        cpython_tags((3, 11), ["cp311"], mac_platforms((15, 4), "arm64")))
    assert not installable_on("x-1-cp39-abi3-macosx_16_0_arm64.whl", (15, 4))


def test_a_metal_build_is_never_tagged_below_what_the_loader_needs(
        foreign_binaries: dict[str, Path], tmp_path: Path) -> None:
    """A Metal build whose binary records 15.0 (built before kernel-builder's 26.0) still
    gets macosx_26_0: the `kernels` loader refuses Metal builds below macOS 26."""
    root = kernel(tmp_path, {METAL: foreign_binaries["macos-15"]})
    (name,) = convert(root, tmp_path / "out")
    assert platform_of(name) == "macosx_26_0_arm64"


def test_an_explicit_macos_version_still_wins(foreign_binaries: dict[str, Path], tmp_path: Path) -> None:
    """`--macos-version 26.0` tags every build 26.0; `--macos-version 15.0` fails the
    Metal build (its binary needs 26.0) and no wheel of the run is written."""
    root = kernel(tmp_path, {CPU_MAC: foreign_binaries["macos-15"], METAL: foreign_binaries["macos-26"]})
    names = convert(root, tmp_path / "a", "--macos-version", "26.0")
    assert [platform_of(n) for n in names] == ["macosx_26_0_arm64"] * 2
    proc = run_cli("to-wheel", root, "1.1.2", "-o", tmp_path / "b", "--macos-version", "15.0", check=False)
    assert "needs macOS 26.0 but the wheel is tagged macosx_15_0_arm64" in one_error_line(proc)
    assert not list((tmp_path / "b").glob("*.whl"))


def test_listed_names_are_the_backends_versions() -> None:
    """What an index lists before any binary is read (serve's catalog, plan_wheel with the
    default options): kernel-builder's version for each backend."""
    tags = TagOptions()
    assert tags.macos_version == "auto"
    planned = {name: platform_of(plan_wheel(parse_variant(name), "img2gray", "1.1.2", tags).filename)
               for name in (CPU_MAC, METAL, TVM_CPU_MAC, "tvm-ffi01-metal-aarch64-darwin",
                            "torch213-cpu-x86_64-darwin")}
    assert planned == {CPU_MAC: "macosx_15_0_arm64", METAL: "macosx_26_0_arm64",
                       TVM_CPU_MAC: "macosx_15_0_arm64",
                       "tvm-ffi01-metal-aarch64-darwin": "macosx_26_0_arm64",
                       "torch213-cpu-x86_64-darwin": "macosx_15_0_x86_64"}


# --- Windows -----------------------------------------------------------------------------


def test_windows_builds_are_tagged_by_their_machine(foreign_binaries: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """x86-64 and arm64 Windows builds (kernel-builder builds both with MSVC; the arm64
    one for CUDA 13) in one run: win_amd64 and win_arm64, both pass check. A Windows tag
    names no OS version (pip takes win_amd64 on every 64-bit Windows), so the PE's
    subsystem version decides nothing; an arm64 DLL in an x86-64 build fails."""
    root = kernel(tmp_path, {WIN_X86: foreign_binaries["windows"], WIN_ARM: foreign_binaries["windows-arm64"]})
    names = convert(root, tmp_path / "out")
    assert [platform_of(n) for n in names] == ["win_amd64", "win_arm64"]
    assert names == [CONTRACT[WIN_X86][0], CONTRACT[WIN_ARM][0]]
    passes_check(*(tmp_path / "out" / name for name in names))
    for name in names:
        assert any(f.check == "pe" and f.status.value == "pass" and "machine matches" in f.message
                   for f in check_wheel(tmp_path / "out" / name).findings)
    wrong = kernel(tmp_path / "wrong", {WIN_X86: foreign_binaries["windows-arm64"]})
    proc = run_cli("to-wheel", wrong, "1.1.2", "-o", tmp_path / "wrong" / "out", check=False)
    assert "has machine 0xaa64, not amd64" in one_error_line(proc)


# --- serve -------------------------------------------------------------------------------


def test_serve_lists_and_makes_each_macos_build_at_its_backends_version(
        foreign_binaries: dict[str, Path], tmp_path: Path) -> None:
    """serve lists a macOS build before reading its binaries, at its backend's version,
    and makes the wheel under that name: a CPU build whose binary needs only 14.0 is
    served as the listed macosx_15_0 wheel (to-wheel alone would tag it 14.0), which
    passes check."""
    from support.servers_serve import get, own_olah, serve

    build = tmp_path / "build-output"
    add_variant(build, CPU_MAC, foreign_binaries["macos-14"])
    add_variant(build, METAL, foreign_binaries["macos-26"])
    repo = tmp_path / "repo"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_kernel_repo.py"), str(build), str(repo)],
                   check=True, capture_output=True)
    with own_olah(tmp_path / "olah", repo) as (olah, _copy):
        env = {"HF_ENDPOINT": olah.endpoint, "HF_HOME": str(tmp_path / "hf"),
               "KERNEL_WHEELS_CACHE": str(tmp_path / "kw"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        with serve("drbh/img2gray", tmp_path / "cache", env) as server:
            status, _, body = get(f"{server.base}simple/img2gray/",
                                  accept="application/vnd.pypi.simple.v1+json")
            assert status == 200
            listed = sorted(f["filename"] for f in json.loads(body)["files"]
                            if f["filename"].startswith("img2gray-1.1.2+"))
            assert listed == ["img2gray-1.1.2+torch213cpu-cp39-abi3-macosx_15_0_arm64.whl",
                              "img2gray-1.1.2+torch213metal-cp39-abi3-macosx_26_0_arm64.whl"]
            for name in listed:
                status, _, data = get(f"{server.base}files/{quote(name, safe='')}")
                assert status == 200, data[:300]
                (tmp_path / name).write_bytes(data)
    passes_check(*(tmp_path / name for name in listed))


@pytest.mark.parametrize("value", ["auto", "15.0", "26", "10.13"])
def test_macos_version_values_that_are_accepted(value: str) -> None:
    assert TagOptions(macos_version=value).macos_version == value
