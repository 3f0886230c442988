"""Issue #32: which GPUs a wheel runs on, proved from its binaries.

Real binaries are compiled here with nvcc 13 (no GPU needed) for known sets of
architectures, once per run: sm_80 only, sm_80 + compute_80 PTX, sm_90a, several at
once, and ``-Xfatbin -compress-all`` (zstd, nvcc's default, and LZ4). The fat binary
reader must read each set back exactly; the compressed entries are inflated here (LZ4,
by a decoder in this file) to prove that the architecture the entry header states is
the one of the cubin inside. pyelftools, an independent ELF reader, finds the section.
Hostile fat binaries (mutations of the real ones) give a FatbinError or a result, never
another exception. ``check`` then judges wheels made from these binaries with
``to-wheel``, and ``install`` chooses among them for a given GPU.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_wheels.elf.fatbin import FatbinError, read_fatbin
from kernel_wheels.elf.reader import ElfError, read_elf, read_elf_bytes
from kernel_wheels.kernel.digest import digest_folder
from kernel_wheels.kernel.gpu_archs import GpuCode, parse_capability, runs_on, sort_code_names
from support.helpers import cuda_python, one_line_error, run_cli

NVCC = Path(os.environ.get("KW_NVCC", "/usr/local/cuda/bin/nvcc"))
KERNEL = """\
__global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
extern "C" void launch(float* x, int n) { add_one<<<(n + 255) / 256, 256>>>(x, n); }
"""
#: name -> (nvcc arguments, the cubins and PTX the binary must hold)
BUILDS: dict[str, tuple[list[str], GpuCode]] = {
    "sm80": (["-gencode", "arch=compute_80,code=sm_80"], GpuCode(("sm_80",))),
    "sm80-ptx": (["-gencode", "arch=compute_80,code=[sm_80,compute_80]"],
                 GpuCode(("sm_80",), ("compute_80",))),
    "sm90a": (["-gencode", "arch=compute_90a,code=sm_90a"], GpuCode(("sm_90a",))),
    "sm90-ptx": (["-gencode", "arch=compute_90,code=[sm_90,compute_90]"],
                 GpuCode(("sm_90",), ("compute_90",))),
    "several": (["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_86,code=sm_86",
                 "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
                 "-gencode", "arch=compute_100f,code=sm_100f", "-gencode", "arch=compute_120,code=sm_120"],
                GpuCode(("sm_80", "sm_86", "sm_90", "sm_100f", "sm_120"), ("compute_90",))),
    "compressed": (["-gencode", "arch=compute_80,code=[sm_80,compute_80]",
                    "-gencode", "arch=compute_90,code=sm_90", "-Xfatbin", "-compress-all"],
                   GpuCode(("sm_80", "sm_90"), ("compute_80",))),
    "compressed-lz4": (["-gencode", "arch=compute_80,code=[sm_80,compute_80]",
                        "-gencode", "arch=compute_90,code=sm_90", "-Xfatbin", "-compress-all",
                        "-compress-mode=speed"],
                       GpuCode(("sm_80", "sm_90"), ("compute_80",))),
    "uncompressed": (["-gencode", "arch=compute_80,code=[sm_80,compute_80]", "-compress-mode=none"],
                     GpuCode(("sm_80",), ("compute_80",))),
}


@pytest.fixture(scope="session")
def gpu_binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from conftest import shared_folder

    def make(out: Path) -> None:
        source = out / "add_one.cu"
        source.write_text(KERNEL)
        for name, (arguments, _) in BUILDS.items():
            # -cudart none: the CUDA runtime is the user's torch's; the binary stays small
            subprocess.run([str(NVCC), "-shared", "-Xcompiler", "-fPIC", "-cudart", "none", *arguments,
                            "-o", str(out / f"lib{name}.so"), str(source)],
                           check=True, capture_output=True, text=True)

    folder = shared_folder(tmp_path_factory, "gpu-binaries", make)
    return {name: folder / f"lib{name}.so" for name in BUILDS}


def _section(path: Path) -> tuple[bytes, int]:
    """``.nv_fatbin`` and its file offset, found by pyelftools."""
    with path.open("rb") as stream:
        section = ELFFile(stream).get_section_by_name(".nv_fatbin")
        assert section is not None
        return section.data(), section["sh_offset"]


def _lz4_block(source: bytes) -> bytes:
    """An LZ4 block inflated (the format is public: tokens of literals and matches)."""
    out = bytearray()
    i = 0
    while i < len(source):
        token = source[i]
        i += 1
        literals = token >> 4
        if literals == 15:
            while True:
                literals += source[i]
                i += 1
                if source[i - 1] != 255:
                    break
        out += source[i:i + literals]
        i += literals
        if i >= len(source):
            break
        distance = source[i] | source[i + 1] << 8
        i += 2
        length = token & 15
        if length == 15:
            while True:
                length += source[i]
                i += 1
                if source[i - 1] != 255:
                    break
        for _ in range(length + 4):
            out.append(out[-distance])
    return bytes(out)


# -- the reader ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(BUILDS))
def test_reader_reads_each_build_back_exactly(gpu_binaries: dict[str, Path], name: str) -> None:
    info = read_elf(gpu_binaries[name], f"pkg/lib{name}.so")
    assert info.gpu_code == BUILDS[name][1]


def test_compression_is_read_from_the_flags(gpu_binaries: dict[str, Path]) -> None:
    expected = {"compressed": {"zstd"}, "compressed-lz4": {"lz4"}, "uncompressed": {None},
                # nvcc 13 compresses PTX with zstd unless told not to compress at all
                "sm80-ptx": {None, "zstd"}}
    for name, kinds in expected.items():
        data, _ = _section(gpu_binaries[name])
        entries = read_fatbin(data, name)
        assert {e.compression for e in entries} == kinds, name
    data, _ = _section(gpu_binaries["compressed"])
    assert all(e.compression == "zstd" for e in read_fatbin(data, "c"))


def test_header_architecture_is_the_cubins_own(gpu_binaries: dict[str, Path]) -> None:
    """Decompression is not needed to learn the architecture: the entry header of an
    LZ4-compressed cubin states the SM that the inflated cubin's own ELF header
    (e_flags) holds, and so does a plain one's."""
    seen = []
    for name in ("compressed-lz4", "several", "sm90a"):
        data, _ = _section(gpu_binaries[name])
        offset = 0
        while offset < len(data):
            _magic, _version, header_size, size = struct.unpack_from("<IHHQ", data, offset)
            entry, end = offset + header_size, offset + header_size + size
            while entry < end:
                kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
                compressed_size, = struct.unpack_from("<I", data, entry + 16)
                arch, = struct.unpack_from("<I", data, entry + 28)
                flags, = struct.unpack_from("<Q", data, entry + 40)
                body = data[entry + entry_header:entry + entry_header + payload]
                if kind == 2:
                    if flags & 0x2000:
                        body = _lz4_block(body[:compressed_size])
                    assert body[:4] == b"\x7fELF"
                    e_flags, = struct.unpack_from("<I", body, 48)
                    assert (e_flags >> 8) & 0xFF == arch, (name, arch, hex(e_flags))
                    seen.append((name, arch, bool(flags & 0x2000)))
                entry += entry_header + payload
            offset = end
    assert ("compressed-lz4", 80, True) in seen and ("compressed-lz4", 90, True) in seen
    assert ("several", 120, False) in seen


# -- hostile fat binaries ------------------------------------------------------------------
FUZZ = settings(max_examples=400, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
_HUGE = (0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFFFFFFFFFF, 1 << 62, 0, 1, 15, 16, 63, 64)


@pytest.fixture(scope="module")
def real_sections(gpu_binaries: dict[str, Path]) -> list[bytes]:
    return [_section(gpu_binaries[name])[0] for name in ("several", "compressed", "sm90a")]


@FUZZ
@given(st.data())
def test_hostile_fat_binaries_give_a_result_or_a_fatbin_error(real_sections: list[bytes],
                                                               data: st.DataObject) -> None:
    section = bytearray(data.draw(st.sampled_from(real_sections)))
    for _ in range(data.draw(st.integers(1, 4))):
        offset = data.draw(st.integers(0, len(section) - 1))
        how = data.draw(st.sampled_from(["byte", "u32", "u64", "cut"]))
        if how == "byte":
            section[offset] = data.draw(st.integers(0, 255))
        elif how == "cut":
            del section[offset:]
            if not section:
                break
        else:
            size = 4 if how == "u32" else 8
            value = data.draw(st.sampled_from(_HUGE)) & ((1 << (8 * size)) - 1)
            section[offset:offset + size] = value.to_bytes(size, "little")
    try:
        entries = read_fatbin(bytes(section), "pkg/libx.so")
    except FatbinError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("pkg/libx.so: ")
        return
    assert len(entries) <= len(section) // 64
    for entry in entries:
        assert 10 <= entry.arch <= 999 and entry.suffix in ("", "a", "f")


@pytest.mark.parametrize(("where", "value", "message"), [
    (8, (1 << 63).to_bytes(8, "little"), "says 9223372036854775808 bytes, past the end"),
    (16 + 8, (1 << 62).to_bytes(8, "little"), "does not fit its container"),
    (16 + 4, (0xFFFFFFF0).to_bytes(4, "little"), "does not fit its container"),
    (16 + 28, (5000).to_bytes(4, "little"), "names architecture 5000, which does not exist"),
    (0, b"\x00\x00\x00\x01", "no fat binary container at byte 0x0"),
    (16 + 40, (0x300011).to_bytes(8, "little"), "both architecture-specific and family code"),
])
def test_named_hostile_shapes(gpu_binaries: dict[str, Path], where: int, value: bytes,
                              message: str) -> None:
    """Sizes that would make a reader allocate or walk gigabytes are refused at once."""
    data, offset = _section(gpu_binaries["sm80"])
    whole = bytearray(gpu_binaries["sm80"].read_bytes())
    whole[offset + where:offset + where + len(value)] = value
    with pytest.raises(FatbinError, match=message):
        read_fatbin(bytes(whole[offset:offset + len(data)]), "x.so")
    # through the ELF reader, as check reads it: an ElfError naming the file
    with pytest.raises(ElfError, match=r"^pkg/libsm80\.so: "):
        read_elf_bytes(bytes(whole), "pkg/libsm80.so")


# -- check -----------------------------------------------------------------------------------
VARIANT = "torch214-cxx11-cu130-x86_64-linux"


def make_wheel(tmp: Path, binaries: dict[str, Path], archs: list[str] | None,
               variant: str = VARIANT, version: str = "1.0.0", check: bool = True,
               extra: list[str] | None = None) -> Path:
    """A CUDA build of ``gpucode`` holding ``binaries`` (libNAME.so), converted by to-wheel."""
    repo = tmp / f"repo-{version}-{variant}"
    folder = repo / "build" / variant
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("from . import _ops\n")
    (folder / "_ops.py").write_text("ops = None\n")
    for name, path in binaries.items():
        (folder / f"lib{name}.so").write_bytes(path.read_bytes())
    backend: dict[str, Any] = {"type": "cuda" if "-cu" in variant else "cpu"}
    if archs is not None:
        backend["archs"] = archs
    metadata = {"name": "gpucode", "id": "_gpucode_0", "version": 1, "license": "Apache-2.0",
                "python-depends": [], "backend": backend,
                "digest": {"algorithm": "sha256", "files": digest_folder(folder)}}
    (folder / "metadata.json").write_text(json.dumps(metadata))
    out = tmp / "dist"
    proc = run_cli("to-wheel", repo, version, "-o", out, *([] if check else ["--no-check"]),
                   *(extra or []))
    assert proc.returncode == 0, proc.stderr
    return next(out.glob(f"gpucode-{version}+*.whl")) if "-cu" in variant else next(out.glob("*.whl"))


def test_check_lists_the_architectures_per_binary_and_wheel(gpu_binaries: dict[str, Path],
                                                            tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, {"sm80": gpu_binaries["sm80"], "sm90-ptx": gpu_binaries["sm90-ptx"]},
                       ["8.0", "9.0+PTX"])
    proc = run_cli("check", "-v", wheel)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    folder = f"gpucode/{VARIANT}"
    assert f"  pass: [gpu] {folder}/libsm80.so: sm_80" in lines
    assert f"  pass: [gpu] {folder}/libsm90-ptx.so: sm_90, compute_90" in lines
    assert "  pass: [gpu] the wheel runs on GPUs with sm_80, sm_90, compute_90" in lines
    assert "  pass: [gpu] kernel_wheels_gpu.json says what the binaries hold" in lines
    report = json.loads(run_cli("check", "--json", wheel).stdout)[0]
    assert report["gpu_code"] == {
        "cubins": ["sm_80", "sm_90"], "ptx": ["compute_90"],
        "binaries": {f"{folder}/libsm80.so": {"cubins": ["sm_80"], "ptx": []},
                     f"{folder}/libsm90-ptx.so": {"cubins": ["sm_90"], "ptx": ["compute_90"]}}}


def test_check_fails_metadata_claiming_only_what_no_binary_runs_on(gpu_binaries: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    """Issue #38: claims are judged by what runs where. None of these runs anywhere the
    binary's code (sm_80, compute_80 PTX) runs: to-wheel refuses, check fails."""
    repo_claims = ["7.0", "7.5"]  # machine code runs on its own major version, PTX only later
    with pytest.raises(AssertionError, match=r"\[gpu\] metadata.json's backend.archs claims 7.0, 7.5, "
                                             r"where no binary holds code that runs \(their kernels are for "
                                             r"sm_80, compute_80\)"):
        make_wheel(tmp_path / "a", {"x": gpu_binaries["sm80-ptx"]}, repo_claims)
    wheel = make_wheel(tmp_path / "b", {"x": gpu_binaries["sm80-ptx"]}, repo_claims, check=False)
    proc = run_cli("check", wheel, check=False)
    assert proc.returncode == 1
    assert ("  fail: [gpu] metadata.json's backend.archs claims 7.0, 7.5, where no binary holds code "
            "that runs (their kernels are for sm_80, compute_80)") in proc.stdout.splitlines()


def test_a_claim_spelled_differently_from_code_that_runs_there_is_a_note(gpu_binaries: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    """Before issue #38 these claims failed (no sm_90, compute_90 or sm_90a of those names);
    the driver compiles compute_80 for a 9.0 GPU, so they hold."""
    wheel = make_wheel(tmp_path, {"x": gpu_binaries["sm80-ptx"]}, ["8.0", "9.0+PTX", "9.0a"])
    proc = run_cli("check", wheel)
    assert ("  info: [gpu] metadata.json's backend.archs claims 9.0+PTX (held as compute_80, which runs "
            "there), 9.0a (held as compute_80, which runs there)") in proc.stdout.splitlines()


def test_check_passes_exact_claims_of_every_build(gpu_binaries: dict[str, Path], tmp_path: Path) -> None:
    claims = {"sm80": ["8.0"], "sm80-ptx": ["8.0+PTX"], "sm90a": ["9.0a"],
              "several": ["8.0", "8.6", "9.0+PTX", "10.0f", "12.0"], "compressed": ["8.0+PTX", "9.0"]}
    for name, archs in claims.items():
        wheel = make_wheel(tmp_path / name, {name: gpu_binaries[name]}, archs)
        assert run_cli("check", wheel, check=False).returncode == 0, name


def test_check_fails_a_cuda_build_without_device_code(tmp_path: Path) -> None:
    source = tmp_path / "plain.c"
    source.write_text("int plain(void) { return 1; }\n")
    plain = tmp_path / "libplain.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(plain), str(source)], check=True)
    wheel = make_wheel(tmp_path, {"plain": plain}, None, check=False)
    proc = run_cli("check", wheel, check=False)
    assert proc.returncode == 1
    assert ("  fail: [gpu] a CUDA build with no kernel in any binary's device code: it runs on no GPU"
            in proc.stdout.splitlines())
    # a CPU build with the same binary: nothing to say
    cpu = make_wheel(tmp_path / "cpu", {"plain": plain}, None, variant="torch214-cxx11-cpu-x86_64-linux")
    proc = run_cli("check", "-v", cpu)
    assert proc.returncode == 0 and "[gpu]" not in proc.stdout


def test_check_fails_a_record_that_lies(gpu_binaries: dict[str, Path], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, {"sm80": gpu_binaries["sm80"]}, ["8.0"])
    record_name = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/kernel_wheels_gpu.json"))
    record = json.loads(zipfile.ZipFile(wheel).read(record_name))
    assert record == {"cubins": ["sm_80"], "ptx": [],
                      "binaries": {f"gpucode/{VARIANT}/libsm80.so": {"cubins": ["sm_80"], "ptx": []}}}
    # the same bytes from a second conversion (reproducible)
    again = make_wheel(tmp_path / "again", {"sm80": gpu_binaries["sm80"]}, ["8.0"])
    assert again.read_bytes() == wheel.read_bytes()
    record["cubins"] = ["sm_80", "sm_90"]
    forged = tmp_path / "forged" / wheel.name
    forged.parent.mkdir()
    _rewrite(wheel, forged, {record_name: (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()})
    proc = run_cli("check", forged, check=False)
    assert proc.returncode == 1
    assert "  fail: [gpu] kernel_wheels_gpu.json does not say what the binaries hold (sm_80)" \
        in proc.stdout.splitlines()


def _rewrite(wheel: Path, target: Path, replaced: dict[str, bytes]) -> None:
    """The wheel with some members replaced and RECORD made to agree (a forger's wheel)."""
    import base64
    import hashlib

    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w") as out:
        names = source.namelist()
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        rows = []
        for name in names:
            if name == record_name:
                continue
            content = replaced.get(name, source.read(name))
            digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={digest},{len(content)}")
            out.writestr(source.getinfo(name), content)
        out.writestr(record_name, "\n".join([*rows, f"{record_name},,"]) + "\n")


def test_check_reports_a_hostile_fat_binary_on_one_line(gpu_binaries: dict[str, Path],
                                                        tmp_path: Path) -> None:
    data, offset = _section(gpu_binaries["sm80"])
    whole = bytearray(gpu_binaries["sm80"].read_bytes())
    whole[offset + 8:offset + 16] = (1 << 63).to_bytes(8, "little")
    hostile = tmp_path / "libhostile.so"
    hostile.write_bytes(bytes(whole))
    wheel = make_wheel(tmp_path, {"hostile": hostile}, ["8.0"], check=False)
    proc = run_cli("check", wheel, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert any(line.startswith("  fail: [elf] gpucode/") and "libhostile.so: a fat binary container says"
               in line for line in proc.stdout.splitlines()), proc.stdout


# -- install -----------------------------------------------------------------------------------
#: GPU -> build -> how it runs there: ("cubin", name), ("jit", PTX name) or None (refused)
DECISIONS: dict[str, dict[str, tuple[str, str] | None]] = {
    "8.0": {"sm80": ("cubin", "sm_80"), "sm80-ptx": ("cubin", "sm_80"), "sm90a": None,
            "sm90-ptx": None, "several": ("cubin", "sm_80")},
    "8.6": {"sm80": ("cubin", "sm_80"), "sm80-ptx": ("cubin", "sm_80"), "sm90a": None,
            "sm90-ptx": None, "several": ("cubin", "sm_86")},
    "9.0": {"sm80": None, "sm80-ptx": ("jit", "compute_80"), "sm90a": ("cubin", "sm_90a"),
            "sm90-ptx": ("cubin", "sm_90"), "several": ("cubin", "sm_90")},
    "10.0": {"sm80": None, "sm80-ptx": ("jit", "compute_80"), "sm90a": None,
             "sm90-ptx": ("jit", "compute_90"), "several": ("cubin", "sm_100f")},
}


@pytest.fixture(scope="module")
def build_wheels(gpu_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One folder of wheels per build (the same project, version and variant)."""
    base = tmp_path_factory.mktemp("gpu-builds")
    claims = {"sm80": ["8.0"], "sm80-ptx": ["8.0+PTX"], "sm90a": ["9.0a"], "sm90-ptx": ["9.0+PTX"],
              "several": ["8.0", "8.6", "9.0+PTX", "10.0f", "12.0"]}
    return {name: make_wheel(base / name, {name: gpu_binaries[name]}, archs).parent
            for name, archs in claims.items()}


def test_install_decisions_for_each_gpu(build_wheels: dict[str, Path]) -> None:
    """`choose` over each build's folder (the wheel's own record, read by --find-links)."""
    from packaging.requirements import Requirement

    from kernel_wheels.install.core import choose
    from kernel_wheels.install.environment import Environment
    from kernel_wheels.kernel.gpu_target import parse_gpu_arch
    from kernel_wheels.remote.find_links import LocalLinks

    tags = ("cp312-abi3-manylinux_2_28_x86_64", "cp39-abi3-manylinux_2_28_x86_64")
    cuda = Environment("/p", "3.12.3", "cpython", "linux", "x86_64", tags, "2.14.1+cu130", None, True,
                       cuda="13.0")
    for capability, builds in DECISIONS.items():
        for name, expected in builds.items():
            files = LocalLinks(str(build_wheels[name])).project_files("gpucode")
            assert files is not None
            choice = choose(Requirement("gpucode"), files, cuda, gpu=parse_gpu_arch(capability))
            verdict = choice.gpu.of(files[0].filename) if choice.gpu else None
            assert verdict is not None
            where = (capability, name)
            if expected is None:
                assert choice.chosen is None, where
                assert choice.decisions[0].rejected == (f"holds {verdict.holds.describe() if verdict.holds else ''}: "
                                                        f"no code for the GPU, compute capability {capability}"), where
            elif expected[0] == "cubin":
                assert choice.chosen is not None and verdict.cubin == expected[1], where
                assert f"it holds {expected[1]}, which runs on the GPU, compute capability {capability}" \
                    in choice.why, where
            else:
                assert choice.chosen is not None and verdict.cubin is None and verdict.ptx == expected[1], where
                assert any(f"only PTX {expected[1]}: the driver compiles its PTX for this GPU at the first call"
                           in line for line in choice.why), where


def test_install_refuses_with_one_line_naming_the_gpu(build_wheels: dict[str, Path]) -> None:
    proc = run_cli("install", "gpucode", "--no-index", "-f", build_wheels["sm80"], "--python", cuda_python(),
                   "--gpu-arch", "9.0", "--dry-run", check=False)
    wheel = next(build_wheels["sm80"].glob("*.whl")).name
    line = one_line_error(proc, status=1)
    assert line == (f"kernel-wheels: error: no wheel of gpucode fits: no build runs on the GPU, compute "
                    f"capability 9.0: {wheel} holds sm_80")
    bad = run_cli("install", "gpucode", "--no-index", "-f", build_wheels["sm80"], "--python", cuda_python(),
                  "--gpu-arch", "sm_90a", "--dry-run", check=False)
    one_line_error(bad, "--gpu-arch 'sm_90a' is not a compute capability such as 8.0, 8.6 or 9.0", status=2)
    # nvcc's spelling of the GPU is the same GPU
    for spelling in ("sm_90", "compute_90"):
        same = run_cli("install", "gpucode", "--no-index", "-f", build_wheels["sm80"], "--python", cuda_python(),
                       "--gpu-arch", spelling, "--dry-run", check=False)
        assert one_line_error(same, status=1) == line


@pytest.fixture(scope="module")
def cuda_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv that sees the CUDA torch venv's packages (torch 2.14.1 / CUDA 13.0,
    5.5 GB, installed once in .venv-cuda) through a .pth file: install writes into this
    venv only, and the probe finds the real CUDA torch."""
    from support.helpers import make_venv

    path = tmp_path_factory.mktemp("cuda-venv") / "venv"
    python = make_venv(path)
    site = subprocess.run([str(cuda_python()), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (next((path / "lib").glob("python3.*")) / "site-packages" / "kw-cuda-torch.pth").write_text(site + "\n")
    return python


def _json_page(index: Any, wheel: Path, gpu_code: dict[str, list[str]]) -> str:
    """``wheel`` on a PEP 691 JSON page that lists ``gpu_code`` as what it holds."""
    import hashlib

    from support.hostile_index import file_route, json_page

    data = wheel.read_bytes()
    index.routes["/files/" + wheel.name] = file_route(data)
    index.routes["/simple/gpucode/"] = json_page({
        "meta": {"api-version": "1.1"}, "name": "gpucode",
        "files": [{"filename": wheel.name, "url": "/files/" + wheel.name,
                   "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                   "kernel-wheels-gpu-code": gpu_code}]})
    return index.url("/simple/")


def test_install_judges_the_file_not_the_index(build_wheels: dict[str, Path], cuda_venv: Path) -> None:
    """Issue #37, 4: an index whose JSON page says a wheel holds sm_90 while its binary
    holds sm_80. The index is a hint for choosing; the downloaded file is judged, and the
    index that described it otherwise is named. Nothing is installed."""
    from support.hostile_index import HostileIndex

    (wheel,) = build_wheels["sm80"].glob("*.whl")
    with HostileIndex() as index:
        url = _json_page(index, wheel, {"cubins": ["sm_90"], "ptx": []})
        proc = run_cli("install", "gpucode", "--index-url", url, "--python", cuda_venv, "--gpu-arch", "9.0",
                       check=False)
    one_line_error(proc, f"lists {wheel.name} as holding sm_90, but the file it served holds sm_80: the "
                         "index does not describe what it serves; nothing was installed", status=1)
    assert "installed" not in proc.stderr.replace("nothing was installed", "")
    listed = subprocess.run([str(cuda_venv), "-m", "pip", "list"], capture_output=True, text=True).stdout
    assert "gpucode" not in listed


def test_install_from_an_html_index_judges_the_gpu_by_the_file(build_wheels: dict[str, Path],
                                                               cuda_venv: Path, tmp_path: Path) -> None:
    """Issue #37, 4: an HTML-only index (our static site under `python -m http.server`, the
    README's way) says nothing of device code; the downloaded wheel's own record, which
    check proves, says an sm_90 build cannot run on an 8.0 GPU: refused, not installed
    with a "not checked" note."""
    from support.servers_index import static_server

    (wheel,) = build_wheels["sm90-ptx"].glob("*.whl")
    run_cli("index", wheel, "-o", tmp_path / "site")
    with static_server(tmp_path / "site") as base:
        proc = run_cli("install", "gpucode", "--index-url", f"{base}simple/", "--python", cuda_venv,
                       "--gpu-arch", "8.0", check=False)
    one_line_error(proc, f"{wheel.name} from ", "[fit] it holds sm_90, compute_90: no code for the GPU, "
                   "compute capability 8.0", "nothing was installed", status=1)
    listed = subprocess.run([str(cuda_venv), "-m", "pip", "list"], capture_output=True, text=True).stdout
    assert "gpucode" not in listed


def test_install_dry_run_json_shows_the_decision(build_wheels: dict[str, Path]) -> None:
    proc = run_cli("install", "gpucode", "--no-index", "-f", build_wheels["sm80-ptx"], "--python",
                   cuda_python(), "--gpu-arch", "9.0", "--dry-run", "--json")
    document = json.loads(proc.stdout)
    wheel = next(build_wheels["sm80-ptx"].glob("*.whl")).name
    assert document["chosen"]["wheel"] == wheel
    assert document["gpu"] == {"capability": "9.0", "arch": "9.0", "source": "--gpu-arch", "name": None,
                               "files": {wheel: {"holds": {"cubins": ["sm_80"], "ptx": ["compute_80"]},
                                                 "runs": True, "cubin": None, "ptx_jit": "compute_80",
                                                 "code_object": None}}}
    assert any("only PTX compute_80" in line and "first call" in line for line in document["why"])
    # no GPU visible here and no --gpu-arch: chosen as before, with a note
    proc = run_cli("install", "gpucode", "--no-index", "-f", build_wheels["sm80"], "--python",
                   cuda_python(), "--dry-run", "--json")
    document = json.loads(proc.stdout)
    assert document["chosen"] is not None and document["gpu"]["capability"] is None
    assert "no GPU visible to torch and no --gpu-arch: not checked which GPUs it runs on (it holds sm_80)" \
        in document["why"]


def test_index_pages_carry_the_code_and_install_chooses_by_them(gpu_binaries: dict[str, Path],
                                                                 tmp_path: Path) -> None:
    """The site's JSON pages list each file's device code; install reads them from the
    index (a file:// Simple API here) and takes the newest release that runs on the GPU."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version, name in (("1.0.0", "sm90-ptx"), ("1.1.0", "sm80")):
        built = make_wheel(tmp_path / version, {name: gpu_binaries[name]},
                           {"sm90-ptx": ["9.0+PTX"], "sm80": ["8.0"]}[name], version=version)
        built.rename(wheels / built.name)
    site = tmp_path / "site"
    run_cli("index", wheels, "-o", site)
    page = json.loads((site / "simple" / "gpucode" / "index.json").read_text())
    listed = {f["filename"].split("+")[0]: f.get("kernel-wheels-gpu-code") for f in page["files"]}
    assert listed == {"gpucode-1.0.0": {"cubins": ["sm_90"], "ptx": ["compute_90"]},
                      "gpucode-1.1.0": {"cubins": ["sm_80"], "ptx": []}}
    with _negotiating_server(site) as base:
        for capability, chosen in (("9.0", "gpucode-1.0.0"), ("8.6", "gpucode-1.1.0")):
            proc = run_cli("install", "gpucode", "--index-url", f"{base}simple/", "--python",
                           cuda_python(), "--gpu-arch", capability, "--dry-run", "--json")
            document = json.loads(proc.stdout)
            assert document["chosen"]["wheel"].startswith(chosen + "+"), (capability, document)
            assert document["gpu"]["files"][document["chosen"]["wheel"]]["runs"] is True


@contextmanager
def _negotiating_server(folder: Path) -> Iterator[str]:
    """A static file server on 127.0.0.1 that answers a folder's index.json to a client
    asking for PEP 691 JSON (as the site's nginx example does), index.html otherwise."""
    import functools
    from http.server import SimpleHTTPRequestHandler

    from support.http_server import LoopbackServer

    class Handler(SimpleHTTPRequestHandler):
        def send_head(self):  # type: ignore[no-untyped-def]
            wants_json = "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
            local = Path(self.translate_path(self.path))
            if wants_json and local.is_dir() and (local / "index.json").is_file():
                body = (local / "index.json").read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return io.BytesIO(body)
            return super().send_head()

        def log_message(self, *args: object) -> None:
            pass

    with LoopbackServer(functools.partial(Handler, directory=str(folder))) as server:
        yield server.base


def test_variant_wheels_name_the_gpus_the_binaries_hold(gpu_binaries: dict[str, Path], tmp_path: Path) -> None:
    """--variants: nvidia :: sm_arch comes from the binaries (metadata.json here claims
    only 8.0 of what they hold), and check holds variant.json to them."""
    wheel_folder = make_wheel(tmp_path, {"several": gpu_binaries["several"]}, ["8.0"], extra=["--variants"]).parent
    labelled = [w for w in wheel_folder.glob("*.whl") if w.name.count("-") == 5]
    assert len(labelled) == 1
    with zipfile.ZipFile(labelled[0]) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/variant.json"))
        variants = json.loads(archive.read(name))["variants"]
    (properties,) = variants.values()
    assert properties["nvidia"]["sm_arch"] == ["100f_real", "120_real", "80_real", "86_real", "90_real",
                                               "90_virtual"]
    assert run_cli("check", labelled[0], check=False).returncode == 0
    # a variant.json that claims a GPU the binaries do not hold fails
    forged_doc = json.loads(zipfile.ZipFile(labelled[0]).read(name))
    label = next(iter(forged_doc["variants"]))
    forged_doc["variants"][label]["nvidia"]["sm_arch"] = ["80_real", "90_real"]
    forged = tmp_path / "forged" / labelled[0].name
    forged.parent.mkdir()
    _rewrite(labelled[0], forged, {name: (json.dumps(forged_doc, indent=2, sort_keys=True) + "\n").encode()})
    proc = run_cli("check", forged, check=False)
    assert proc.returncode == 1
    assert ("  fail: [gpu] variant.json says nvidia :: sm_arch 80_real, 90_real, but the binaries hold "
            "100f_real, 120_real, 80_real, 86_real, 90_real, 90_virtual") in proc.stdout.splitlines()


# --- the grammar and CUDA's rules, written once (kernel/gpu_archs.py) ---------------------


@pytest.mark.parametrize(("text", "code"), [
    ("8.0", (("sm_80",), ())),
    ("9.0+PTX", (("sm_90",), ("compute_90",))),
    ("9.0a", (("sm_90a",), ())),
    ("10.0f+PTX", (("sm_100f",), ("compute_100f",))),
    ("12.1", (("sm_121",), ())),
    ("10.10", None),  # a capability to kernel-builder, but nvcc's names hold one minor digit
    ("99999.0", None),
])
def test_a_capability_stands_for_nvccs_device_code(text: str, code: tuple[tuple[str, ...], ...] | None) -> None:
    capability = parse_capability(text)
    assert capability is not None
    assert capability.code == (GpuCode(*code) if code else None)


@pytest.mark.parametrize("text", ["", "8", "8.", ".0", "8.0b", "8.0+ptx", "8.0+PTX+PTX", " 8.0", "sm_80",
                                  "\u0668.\u0660"])
def test_what_is_not_a_capability(text: str) -> None:
    assert parse_capability(text) is None


#: (device code, GPU capability) -> runs: CUDA's rules for machine code and for PTX.
RUNS = {
    ("sm_80", (8, 0)): True, ("sm_80", (8, 6)): True, ("sm_86", (8, 0)): False,
    ("sm_80", (9, 0)): False,  # machine code stays within its major version
    ("sm_90a", (9, 0)): True, ("sm_90a", (9, 1)): False,  # architecture-specific: that one only
    ("sm_100f", (10, 3)): True, ("sm_100f", (12, 0)): False,  # family code: the same major version
    ("compute_80", (9, 0)): True, ("compute_80", (12, 1)): True, ("compute_90", (8, 6)): False,
    ("compute_90a", (9, 0)): True, ("compute_90a", (10, 0)): False,
    ("compute_100f", (10, 3)): True, ("compute_100f", (12, 0)): False,
    ("sm_8", (8, 0)): False, ("lto_80", (8, 0)): False, ("sm_1000", (100, 0)): False,  # not names
}


@pytest.mark.parametrize(("name", "gpu"), list(RUNS))
def test_which_device_code_runs_on_which_gpu(name: str, gpu: tuple[int, int]) -> None:
    assert runs_on(name, gpu) is RUNS[name, gpu]


def test_a_capability_runs_where_its_code_runs() -> None:
    for text in ("8.0", "8.0+PTX", "9.0a", "9.0a+PTX", "10.0f", "10.0f+PTX"):
        capability = parse_capability(text)
        assert capability is not None and capability.code is not None
        for gpu in ((7, 5), (8, 0), (8, 6), (9, 0), (10, 0), (10, 3), (12, 0)):
            held = (*capability.code.cubins, *capability.code.ptx)
            assert capability.runs_on(gpu) is any(runs_on(name, gpu) for name in held), (text, gpu)


def test_device_code_sorts_by_architecture_then_suffix() -> None:
    assert sort_code_names(["sm_120", "sm_90a", "sm_100f", "sm_90", "sm_80", "sm_90"]) == (
        "sm_80", "sm_90", "sm_90a", "sm_100f", "sm_120")
    assert GpuCode(("sm_90",), ("compute_90",)).union(GpuCode(("sm_80",), ())) == \
        GpuCode(("sm_80", "sm_90"), ("compute_90",))
