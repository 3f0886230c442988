"""Issue #38, points 2-4: GPU truth by kernels, claims judged by what runs where, and ROCm's
HIP code objects.

Real builds, compiled here without a GPU: nvcc 13 objects per ``.cu`` file with the
``-gencode`` flags kernel-builder's CMake gives each component (its CUDA 13 default list,
``9.0a``, ...), linked into one extension; clang's HIP compiler (Debian's clang 19, the
compiler hipcc drives) for gfx90a and gfx942, plain and ``--offload-compress``. Each
numbered case of the issue failed on the code before:

2. a host-only component built for the default capabilities beside a ``9.0a`` kernel
   was recorded as running on sm_75 ... sm_121 and installed for an sm_80 GPU;
3. a component with ``cuda-capabilities`` and no device code (headers only) adds its
   capabilities to ``archs``: to-wheel refused the build kernel-builder ships;
4. a ROCm build with no HIP code object passed without a ``[gpu]`` line.

Independent evidence: pyelftools finds each kernel's ``.text.<name>`` and
``.nv.info.<name>`` sections in the cubins, and ``nvcc -ptx`` names the same kernels as
``.entry``; clang's own ``clang-offload-bundler --list`` names the bundle's entries.
"""

from __future__ import annotations

import io
import json
import re
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_wheels.elf.fatbin import FatbinError, device_code, read_fatbin
from kernel_wheels.elf.inflate import MAX_INFLATED, MAX_RATIO
from kernel_wheels.elf.kernels import EM_CUDA, elf_holds_kernel
from kernel_wheels.elf.offload_bundle import OffloadBundleError, read_bundles
from kernel_wheels.elf.reader import ElfError, read_elf, read_elf_bytes
from kernel_wheels.kernel.gpu_archs import GpuCode, amd_runs_on, judge_claim, parse_amd_target
from support.gpu_builds import (
    CLANG,
    DEFAULT_ARCHS,
    DEVICE_ONLY,
    HIP_HOST_ONLY,
    HIP_KERNEL,
    HIP_OTHER_KERNEL,
    HOST_ONLY,
    KERNEL,
    NVCC,
    ROCM_VARIANT,
    clang_hip_shared,
    kernel_builder_archs,
    make_gpu_wheel,
    nvcc_cubin,
    nvcc_shared,
    rocm_torch_standin,
)
from support.helpers import cuda_python, one_line_error, run_cli

ZSTD = ("-Xfatbin", "-compress-all")
LZ4 = ("-Xfatbin", "-compress-all", "-compress-mode=speed")


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The CUDA and HIP shared objects of this file, built once per run."""
    from conftest import shared_folder

    def make(out: Path) -> None:
        # 2: the default-capability component holds host code only; the one kernel is 9.0a
        nvcc_shared(out / "libdefault-host-90a.so", [(HOST_ONLY, DEFAULT_ARCHS, ()), (KERNEL, ("9.0a",), ())])
        for name, flags in (("zstd", ZSTD), ("lz4", LZ4)):
            nvcc_shared(out / f"libdefault-host-90a-{name}.so",
                        [(HOST_ONLY, DEFAULT_ARCHS, flags), (KERNEL, ("9.0a",), flags)])
        # 3: the kernel component builds 8.0 and 9.0; another lists more and compiles no kernel
        nvcc_shared(out / "libkernel-80-90.so", [(HOST_ONLY, ("8.0", "9.0"), ()), (KERNEL, ("8.0", "9.0"), ())])
        nvcc_shared(out / "libhost-only.so", [(HOST_ONLY, ("8.0", "9.0+PTX"), ())])
        nvcc_shared(out / "libhost-only-zstd.so", [(HOST_ONLY, ("8.0", "9.0+PTX"), ZSTD)])
        nvcc_cubin(out / "kernel.cubin", KERNEL, "8.0")
        nvcc_cubin(out / "device-only.cubin", DEVICE_ONLY, "8.0", ("-rdc=true",))
        nvcc_cubin(out / "host-only.cubin", HOST_ONLY, "8.0")
        (out / "kernel.ptx").write_text(_ptx(out, KERNEL))
        # 4 and ROCm
        clang_hip_shared(out / "libhip.so", [(HIP_KERNEL, ("gfx90a", "gfx942"))])
        clang_hip_shared(out / "libhip-zstd.so", [(HIP_KERNEL, ("gfx90a", "gfx942"))], ("--offload-compress",))
        clang_hip_shared(out / "libhip-two.so", [(HIP_KERNEL, ("gfx90a",)), (HIP_OTHER_KERNEL, ("gfx942",))])
        clang_hip_shared(out / "libhip-xnack.so", [(HIP_KERNEL, ("gfx942:xnack+",))])
        clang_hip_shared(out / "libhip-90a.so", [(HIP_KERNEL, ("gfx90a",))])
        clang_hip_shared(out / "libhip-host.so", [(HIP_HOST_ONLY, ("gfx90a", "gfx942"))])

    folder = shared_folder(tmp_path_factory, "gpu-kernel-builds", make)
    return {path.name: path for path in folder.iterdir()}


def _ptx(out: Path, source: str) -> str:
    cu = out / "ptx-source.cu"
    cu.write_text(source)
    subprocess.run([str(NVCC), "-ptx", "-arch=compute_80", "-o", str(out / "k.ptx"), str(cu)], check=True,
                   capture_output=True)
    return (out / "k.ptx").read_text()


def _section(path: Path, name: str) -> tuple[bytes, int]:
    with path.open("rb") as stream:
        section = ELFFile(stream).get_section_by_name(name)
        assert section is not None, (path, name)
        return section.data(), section["sh_offset"]


# -- what counts as a kernel -------------------------------------------------------------------
def _functions(data: bytes) -> dict[str, int]:
    """The cubin's STT_FUNC symbols and their raw st_other bytes (pyelftools finds the
    table; it parses st_other into visibility bits only, so the byte is read here)."""
    elf = ELFFile(io.BytesIO(data))
    table = elf.get_section_by_name(".symtab")
    found = {}
    for index, symbol in enumerate(table.iter_symbols()):
        if symbol["st_info"]["type"] == "STT_FUNC":
            found[symbol.name] = data[table["sh_offset"] + index * table["sh_entsize"] + 5]
    return found


def test_a_kernel_is_what_nvcc_marks_as_an_entry(builds: dict[str, Path]) -> None:
    """The kernels PTX names as .entry are exactly the cubin's functions marked
    STO_CUDA_ENTRY (0x10). A device function kept by -rdc has a .text.<name> and an
    .nv.info.<name> section too (pyelftools): section names do not tell kernels apart,
    the flag does. Host code gives a cubin with no function at all."""
    entries = re.findall(r"^\.visible \.entry (\w+)\(", builds["kernel.ptx"].read_text(), re.MULTILINE)
    assert entries == ["_Z7add_onePfi"]
    expected = {"kernel.cubin": ({"_Z7add_onePfi": True}, True),
                "device-only.cubin": ({"twice": False}, False),
                "host-only.cubin": ({}, False)}
    for name, (functions, kernel) in expected.items():
        data = builds[name].read_bytes()
        found = _functions(data)
        assert {f: bool(other & 0x10) for f, other in found.items()} == functions, name
        sections = {s.name for s in ELFFile(io.BytesIO(data)).iter_sections()}
        assert all({f".text.{f}", f".nv.info.{f}"} <= sections for f in functions), name
        assert elf_holds_kernel(data, 0, len(data), EM_CUDA, name) is kernel, name
    assert [f for f, other in _functions(builds["kernel.cubin"].read_bytes()).items() if other & 0x10] == entries


def test_host_code_gives_cubins_without_kernels_which_do_not_count(builds: dict[str, Path]) -> None:
    for suffix in ("", "-zstd", "-lz4"):
        info = read_elf(builds[f"libdefault-host-90a{suffix}.so"], "pkg/lib.so")
        assert info.gpu_code == GpuCode(("sm_90a",)), suffix
        assert info.kernel_less == GpuCode(("sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100",
                                            "sm_110", "sm_120", "sm_121"), ("compute_121",)), suffix
    data, _ = _section(builds["libdefault-host-90a-lz4.so"], ".nv_fatbin")
    assert {e.compression for e in read_fatbin(data, "x")} == {"lz4"}
    for name in ("libhost-only.so", "libhost-only-zstd.so"):
        info = read_elf(builds[name], name)
        assert info.gpu_code == GpuCode() and info.kernel_less == GpuCode(("sm_80", "sm_90"), ("compute_90",))


# -- point 2: the record, check, to-wheel and install use the truth ----------------------------
def test_a_host_only_default_component_beside_a_90a_kernel(builds: dict[str, Path], tmp_path: Path) -> None:
    archs = kernel_builder_archs(DEFAULT_ARCHS, ("9.0a",))
    wheel, proc = make_gpu_wheel(tmp_path, {"ops": builds["libdefault-host-90a-zstd.so"]}, archs)
    assert wheel is not None
    not_proved = [line for line in proc.stderr.splitlines() if "not verified: [gpu]" in line]
    assert len(not_proved) == 1 and not_proved[0].startswith(wheel.name), proc.stderr
    assert ("claims 10.0, 11.0, 12.0, 12.1+PTX, 7.5, 8.0, 8.6, 8.7, 8.9, where no cubin or PTX with a kernel "
            "runs") in not_proved[0]
    assert "the wheel is recorded and installed for what its kernels run on, sm_90a" in not_proved[0]
    with zipfile.ZipFile(wheel) as archive:
        record = json.loads(archive.read(next(n for n in archive.namelist()
                                              if n.endswith("/kernel_wheels_gpu.json"))))
    assert (record["cubins"], record["ptx"]) == (["sm_90a"], [])
    lines = run_cli("check", "-v", wheel).stdout.splitlines()
    assert "  pass: [gpu] the wheel runs on GPUs with sm_90a" in lines
    assert "  info: [gpu] metadata.json's backend.archs claims 9.0 (held as sm_90a, which runs there)" in lines
    binary = next(line for line in lines if "[gpu]" in line and "libops.so:" in line)
    assert binary.endswith("libops.so: sm_90a; no kernel in sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, "
                           "sm_100, sm_110, sm_120, sm_121, compute_121")
    # install: refused on an sm_80 GPU with one line, chosen for 9.0
    refused = run_cli("install", "gpucode", "--no-index", "-f", wheel.parent, "--python", cuda_python(),
                      "--gpu-arch", "8.0", "--dry-run", check=False)
    one_line_error(refused, f"no build runs on the GPU, compute capability 8.0: {wheel.name} holds sm_90a",
                   status=1)
    chosen = json.loads(run_cli("install", "gpucode", "--no-index", "-f", wheel.parent, "--python",
                                cuda_python(), "--gpu-arch", "9.0", "--dry-run", "--json").stdout)
    assert chosen["chosen"]["wheel"] == wheel.name
    assert chosen["gpu"]["files"][wheel.name]["cubin"] == "sm_90a"


def test_a_build_without_any_kernel_fails(builds: dict[str, Path], tmp_path: Path) -> None:
    _, proc = make_gpu_wheel(tmp_path, {"ops": builds["libhost-only-zstd.so"]}, ["8.0", "9.0+PTX"], expect=1)
    assert ("[gpu] a CUDA build with no kernel in any binary's device code (sm_80, sm_90, compute_90 compiled "
            "from host code only): it runs on no GPU") in proc.stderr
    assert "Traceback" not in proc.stderr


# -- point 3: claims judged by what runs where --------------------------------------------------
def test_a_component_without_device_code_covered_by_other_code_converts(builds: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    """sage-attention's shape: a header-only component lists 8.0, 8.9 and 9.0a; the kernels
    are built for 8.0 and 9.0, which run on 8.9 (sm_80) and 9.0 (sm_90): a note each."""
    archs = kernel_builder_archs(("8.0", "9.0"), ("8.0", "8.9", "9.0a"))
    wheel, proc = make_gpu_wheel(tmp_path, {"ops": builds["libkernel-80-90.so"]}, archs)
    assert wheel is not None
    note = (f"{wheel.name}: info: [gpu] metadata.json's backend.archs claims 8.9 (held as sm_80, which runs "
            "there), 9.0a (held as sm_90, which runs there)")
    assert note in proc.stderr.splitlines()
    report = json.loads(run_cli("check", "--json", wheel).stdout)[0]
    assert report["passed"] and [f["status"] for f in report["findings"] if f["check"] == "gpu"].count("info") == 1


def test_a_claim_no_code_runs_on_is_said_not_refused(builds: dict[str, Path], tmp_path: Path) -> None:
    """The header-only component lists 12.0, which no kernel is built for: to-wheel
    converts (kernel-builder ships it) and says what it cannot prove; install refuses a
    12.0 GPU."""
    archs = kernel_builder_archs(("8.0", "9.0"), ("8.0", "12.0"))
    wheel, proc = make_gpu_wheel(tmp_path, {"ops": builds["libkernel-80-90.so"]}, archs)
    assert wheel is not None
    assert any(line.startswith(f"{wheel.name}: not verified: [gpu] metadata.json's backend.archs claims 12.0, "
                               "where no cubin or PTX with a kernel runs") for line in proc.stderr.splitlines())
    refused = run_cli("install", "gpucode", "--no-index", "-f", wheel.parent, "--python", cuda_python(),
                      "--gpu-arch", "12.0", "--dry-run", check=False)
    one_line_error(refused, "no build runs on the GPU, compute capability 12.0", status=1)


def test_claims_none_of_which_run_fail(builds: dict[str, Path], tmp_path: Path) -> None:
    _, proc = make_gpu_wheel(tmp_path, {"ops": builds["libkernel-80-90.so"]}, ["10.0", "12.0"], expect=1)
    assert ("[gpu] metadata.json's backend.archs claims 10.0, 12.0, where no binary holds code that runs "
            "(their kernels are for sm_80, sm_90)") in proc.stderr


@pytest.mark.parametrize(("claim", "code", "exact", "runs_as", "covered"), [
    ("9.0a", GpuCode(("sm_90",)), False, "sm_90", True),
    ("8.9", GpuCode(("sm_80", "sm_86")), False, "sm_86", True),
    ("9.0", GpuCode((), ("compute_80",)), False, "compute_80", True),  # the driver's JIT
    ("9.0+PTX", GpuCode(("sm_90",), ("compute_80",)), False, "sm_90", True),
    ("9.0+PTX", GpuCode(("sm_90",), ("compute_90a",)), False, "sm_90", False),  # 90a PTX: not forward
    ("10.0f+PTX", GpuCode(("sm_100f",), ("compute_100f",)), True, None, True),
    ("9.0", GpuCode(("sm_80",)), False, None, False),
    ("gfx942", GpuCode(code_objects=("gfx942:sramecc+:xnack-",)), False, "gfx942:sramecc+:xnack-", True),
    ("gfx90a", GpuCode(code_objects=("gfx90a",)), True, None, True),
    ("gfx90a", GpuCode(code_objects=("gfx942",)), False, None, False),
])
def test_what_runs_where_decides_a_claim(claim: str, code: GpuCode, exact: bool, runs_as: str | None,
                                         covered: bool) -> None:
    verdict = judge_claim(claim, code)
    assert verdict is not None
    assert (verdict.exact, verdict.runs_as, verdict.covered) == (exact, runs_as, covered)


# -- point 4 and ROCm ----------------------------------------------------------------------------
def _bundler_list(data: bytes, tmp: Path) -> list[str]:
    blob = tmp / "bundle.bin"
    blob.write_bytes(data)
    bundler = CLANG.parent / "clang-offload-bundler"
    proc = subprocess.run([str(bundler), "--list", "--type=o", f"--input={blob}"], capture_output=True,
                          text=True, check=True)
    return sorted(proc.stdout.split())


def test_hip_code_objects_are_read(builds: dict[str, Path], tmp_path: Path) -> None:
    expected = {"libhip.so": ("gfx90a", "gfx942"), "libhip-zstd.so": ("gfx90a", "gfx942"),
                "libhip-two.so": ("gfx90a", "gfx942"), "libhip-xnack.so": ("gfx942:xnack+",)}
    for name, targets in expected.items():
        info = read_elf(builds[name], name)
        assert info.gpu_code == GpuCode(code_objects=targets), name
    data, _ = _section(builds["libhip-zstd.so"], ".hip_fatbin")
    assert data[:4] == b"CCOB"
    entries = read_bundles(data, "x")
    assert {e.compression for e in entries} == {"zstd"}
    assert sorted(e.bundle_id for e in entries) == _bundler_list(data, tmp_path)
    # no kernel, no bundle: clang writes no .hip_fatbin for host code
    assert read_elf(builds["libhip-host.so"], "x").gpu_code is None


@pytest.mark.parametrize("version", [1, 2, 3])
def test_zlib_compressed_bundles_of_each_header_version(builds: dict[str, Path], version: int) -> None:
    """clang 19 compresses with zstd; zlib and header versions 1 and 3 (newer clangs)
    are written here in LLVM's documented layout around the real bundle's bytes."""
    bundle, _ = _section(builds["libhip.so"], ".hip_fatbin")
    packed = zlib.compress(bundle)
    header = {1: struct.pack("<IQ", len(bundle), 0),
              2: struct.pack("<IIQ", 8 + 16 + len(packed), len(bundle), 0),
              3: struct.pack("<QQQ", 8 + 24 + len(packed), len(bundle), 0)}[version]
    blob = b"CCOB" + struct.pack("<HH", version, 0) + header + packed
    # two of them, the second on a 4096-byte boundary, as a linker lays out two objects'
    section = blob + bytes(-len(blob) % 4096) + blob
    entries = read_bundles(section, "x")
    assert [e.target for e in entries if e.target] == ["gfx90a", "gfx942"] * 2
    assert {e.compression for e in entries} == {"zlib"}


def _rocm_wheel(tmp: Path, binary: Path, archs: list[str] | None, expect: int = 0):  # type: ignore[no-untyped-def]
    return make_gpu_wheel(tmp, {"ops": binary}, archs, variant=ROCM_VARIANT, expect=expect)


def test_a_rocm_build_without_a_code_object_fails(builds: dict[str, Path], tmp_path: Path) -> None:
    _, proc = _rocm_wheel(tmp_path, builds["libhip-host.so"], ["gfx90a", "gfx942"], expect=1)
    assert "[gpu] a ROCm build with no kernel in any binary's device code: it runs on no GPU" in proc.stderr
    wheel, _ = make_gpu_wheel(tmp_path / "unchecked", {"ops": builds["libhip-host.so"]}, ["gfx90a", "gfx942"],
                              variant=ROCM_VARIANT, check=False)
    assert wheel is not None
    proc = run_cli("check", wheel, check=False)
    assert proc.returncode == 1
    assert "  fail: [gpu] a ROCm build with no kernel in any binary's device code: it runs on no GPU" \
        in proc.stdout.splitlines()


def test_a_rocm_build_is_checked_recorded_and_indexed(builds: dict[str, Path], tmp_path: Path) -> None:
    wheel, _ = _rocm_wheel(tmp_path, builds["libhip-zstd.so"], ["gfx90a", "gfx942"])
    assert wheel is not None
    lines = run_cli("check", "-v", wheel).stdout.splitlines()
    assert f"  pass: [gpu] gpucode/{ROCM_VARIANT}/libops.so: gfx90a, gfx942" in lines
    assert "  pass: [gpu] the wheel runs on GPUs with gfx90a, gfx942" in lines
    assert "  pass: [gpu] kernel_wheels_gpu.json says what the binaries hold" in lines
    site = tmp_path / "site"
    run_cli("index", wheel.parent, "-o", site)
    page = json.loads((site / "simple" / "gpucode" / "index.json").read_text())
    assert [f.get("kernel-wheels-gpu-code") for f in page["files"]] == [
        {"cubins": [], "ptx": [], "code_objects": ["gfx90a", "gfx942"]}]
    # a claim no code object holds, beside one that is held: not verified, converted
    partial, proc = _rocm_wheel(tmp_path / "partial", builds["libhip-90a.so"], ["gfx90a", "gfx942"])
    assert partial is not None
    assert any("not verified: [gpu] metadata.json's backend.archs claims gfx942, where no HIP code object "
               "with a kernel runs" in line for line in proc.stderr.splitlines())
    _, proc = _rocm_wheel(tmp_path / "wrong", builds["libhip-90a.so"], ["gfx942"], expect=1)
    assert "claims gfx942, where no binary holds code that runs (their kernels are for gfx90a)" in proc.stderr


@pytest.fixture(scope="module")
def rocm_wheels(builds: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("rocm-wheels")
    made = {}
    for name, archs in (("libhip.so", ["gfx90a", "gfx942"]), ("libhip-90a.so", ["gfx90a"]),
                        ("libhip-xnack.so", ["gfx942"])):
        wheel, _ = make_gpu_wheel(base / name, {"ops": builds[name]}, archs, variant=ROCM_VARIANT)
        assert wheel is not None
        made[name] = wheel
    return made


def test_install_chooses_by_the_gpus_gcn_arch_name(rocm_wheels: dict[str, Path],
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """The stand-in ROCm torch reports an MI300X (gfx942:sramecc+:xnack-): install's probe
    reads it, chooses the build holding gfx942, refuses the gfx90a-only one and the one
    built for xnack on."""
    python = rocm_torch_standin(tmp_path_factory.mktemp("rocm-torch"), "gfx942:sramecc+:xnack-")
    proc = run_cli("install", "gpucode", "--no-index", "-f", rocm_wheels["libhip.so"].parent, "--python",
                   python, "--dry-run", "--json")
    document = json.loads(proc.stdout)
    assert document["chosen"]["wheel"] == rocm_wheels["libhip.so"].name
    assert document["gpu"]["arch"] == "gfx942:sramecc+:xnack-" and document["gpu"]["source"] == "torch"
    assert document["gpu"]["files"][rocm_wheels["libhip.so"].name]["code_object"] == "gfx942"
    assert ("it holds gfx942, which runs on the GPU, AMD Instinct MI300X (gfx942:sramecc+:xnack-)"
            in document["why"])
    for name, held in (("libhip-90a.so", "gfx90a"), ("libhip-xnack.so", "gfx942:xnack+")):
        refused = run_cli("install", "gpucode", "--no-index", "-f", rocm_wheels[name].parent, "--python",
                          python, "--dry-run", check=False)
        one_line_error(refused, "no build runs on the GPU, AMD Instinct MI300X (gfx942:sramecc+:xnack-): "
                                f"{rocm_wheels[name].name} holds {held}", status=1)
    # --gpu-arch names another GPU (features left out agree with either setting)
    chosen = json.loads(run_cli("install", "gpucode", "--no-index", "-f", rocm_wheels["libhip-xnack.so"].parent,
                                "--python", python, "--gpu-arch", "gfx942", "--dry-run", "--json").stdout)
    assert chosen["chosen"]["wheel"] == rocm_wheels["libhip-xnack.so"].name
    bad = run_cli("install", "gpucode", "--no-index", "-f", rocm_wheels["libhip.so"].parent, "--python", python,
                  "--gpu-arch", "gfx942:xnack*", "--dry-run", check=False)
    one_line_error(bad, "--gpu-arch 'gfx942:xnack*' is not a compute capability", status=2)


@pytest.mark.parametrize(("code_object", "gpu", "runs"), [
    ("gfx942", "gfx942:sramecc+:xnack-", True),
    ("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-", True),
    ("gfx942:xnack+", "gfx942:sramecc+:xnack-", False),
    ("gfx942:xnack+", "gfx942", True),  # the GPU's setting not known: agrees
    ("gfx90a", "gfx942", False),
    ("gfx9-4-generic", "gfx942", False),  # generic targets are not matched to processors
])
def test_which_code_object_runs_on_which_gpu(code_object: str, gpu: str, runs: bool) -> None:
    assert amd_runs_on(code_object, gpu) is runs


@pytest.mark.parametrize("text", ["gfx", "gfx9", "gfx90A", "gfx942:xnack", "gfx942:xnack+:xnack-",
                                  "sm_90", "gfx942:", " gfx942", "gfx942:a+:b+:c+:d+:e+"])
def test_what_is_not_an_amd_target(text: str) -> None:
    assert parse_amd_target(text) is None


# -- bounded inflation and hostile device code ---------------------------------------------------
def _first_entry(data: bytes) -> int:
    """The offset of the first entry header in a fat binary section."""
    return struct.unpack_from("<H", data, 6)[0]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("inflated", MAX_INFLATED + 1, "says it inflates to 1073741825 bytes (the bound is 1073741824)"),
    ("inflated", 1 << 40, "says it inflates to 1099511627776 bytes"),
    ("ratio", None, f"more than {MAX_RATIO} times as many"),
    ("inflated-small", None, "does not inflate to the"),
    ("corrupt", None, "does not inflate"),
])
def test_a_compressed_entry_is_inflated_within_bounds(builds: dict[str, Path], field: str,
                                                     value: int | None, message: str) -> None:
    path = builds["libhost-only-zstd.so"]
    data, offset = _section(path, ".nv_fatbin")
    whole = bytearray(path.read_bytes())
    entry = offset + _first_entry(data)
    header_size, = struct.unpack_from("<I", whole, entry + 4)
    compressed, = struct.unpack_from("<I", whole, entry + 16)
    inflated, = struct.unpack_from("<Q", whole, entry + 56)
    if field == "inflated":
        struct.pack_into("<Q", whole, entry + 56, value)
    elif field == "ratio":
        struct.pack_into("<Q", whole, entry + 56, compressed * MAX_RATIO + 1)
    elif field == "inflated-small":
        struct.pack_into("<Q", whole, entry + 56, inflated - 1)
    else:
        payload = entry + header_size
        whole[payload + 8:payload + 24] = bytes(16)
    with pytest.raises(ElfError, match=r"^pkg/libops\.so: the sm_80 cubin of its fat binary .*" + re.escape(message)):
        read_elf_bytes(bytes(whole), "pkg/libops.so")


FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
_VALUES = (0xFFFFFFFF, 0x7FFFFFFF, 0xFFFFFFFFFFFFFFFF, 1 << 62, 0, 1, 24, 64, 4096)


def _mutated(data: st.DataObject, section: bytes) -> bytes:
    mutated = bytearray(section)
    for _ in range(data.draw(st.integers(1, 4))):
        offset = data.draw(st.integers(0, len(mutated) - 1))
        how = data.draw(st.sampled_from(["byte", "u32", "u64", "cut"]))
        if how == "byte":
            mutated[offset] = data.draw(st.integers(0, 255))
        elif how == "cut":
            del mutated[max(offset, 1):]
        else:
            size = 4 if how == "u32" else 8
            value = data.draw(st.sampled_from(_VALUES)) & ((1 << (8 * size)) - 1)
            mutated[offset:offset + size] = value.to_bytes(size, "little")[:len(mutated) - offset]
    return bytes(mutated)


@pytest.fixture(scope="module")
def device_sections(builds: dict[str, Path]) -> dict[str, list[bytes]]:
    return {"fatbin": [_section(builds[n], ".nv_fatbin")[0] for n in
                       ("libdefault-host-90a.so", "libdefault-host-90a-zstd.so", "libdefault-host-90a-lz4.so")],
            "hip": [_section(builds[n], ".hip_fatbin")[0] for n in ("libhip.so", "libhip-zstd.so", "libhip-two.so")]}


@FUZZ
@given(st.data())
def test_hostile_fat_binary_payloads_give_a_result_or_a_fatbin_error(device_sections: dict[str, list[bytes]],
                                                                     data: st.DataObject) -> None:
    """Mutated sections whose payloads (cubins, PTX, LZ4 and zstd streams) are read for
    kernels: a FatbinError (an ElfError) or a result, never another exception."""
    section = _mutated(data, data.draw(st.sampled_from(device_sections["fatbin"])))
    try:
        entries = read_fatbin(section, "pkg/libx.so")
        held, idle = device_code(section, entries, "pkg/libx.so")
    except ElfError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("pkg/libx.so: ")
        return
    assert set(held.names()).isdisjoint(idle.names())


@FUZZ
@given(st.data())
def test_hostile_offload_bundles_give_a_result_or_an_offload_bundle_error(
        device_sections: dict[str, list[bytes]], data: st.DataObject) -> None:
    section = _mutated(data, data.draw(st.sampled_from(device_sections["hip"])))
    try:
        entries = read_bundles(section, "pkg/libx.so")
    except ElfError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("pkg/libx.so: ")
        return
    assert len(entries) <= len(section) // 24 * 64  # inflated bundles hold at most their bound
    for entry in entries:
        assert entry.target is None or parse_amd_target(entry.target) is not None


@pytest.mark.parametrize(("where", "value", "message"), [
    (24, (1 << 62).to_bytes(8, "little"), "says 4611686018427387904 entries"),
    (32, (1 << 40).to_bytes(8, "little"), "lies past its end"),
    (48, (5000).to_bytes(8, "little"), "-byte ID"),
    (0, b"X", "no offload bundle at byte 0x0"),
])
def test_named_hostile_offload_bundles(builds: dict[str, Path], where: int, value: bytes, message: str) -> None:
    data, offset = _section(builds["libhip.so"], ".hip_fatbin")
    whole = bytearray(builds["libhip.so"].read_bytes())
    whole[offset + where:offset + where + len(value)] = value
    with pytest.raises(OffloadBundleError, match=message):
        read_bundles(bytes(whole[offset:offset + len(data)]), "x.so")
    with pytest.raises(ElfError, match=r"^pkg/libhip\.so: "):
        read_elf_bytes(bytes(whole), "pkg/libhip.so")
    assert isinstance(FatbinError("x"), ElfError)


def test_a_sections_payloads_inflate_within_one_budget() -> None:
    """Each payload is bounded, and so are a section's payloads together (a section of
    many entries, each within its own bound, cannot add up to more)."""
    from kernel_wheels.elf.inflate import MAX_INFLATED_PER_SECTION, Budget, InflateError

    budget = Budget()
    for _ in range(MAX_INFLATED_PER_SECTION // MAX_INFLATED):
        budget.spend(MAX_INFLATED, "x.so: an entry")
    with pytest.raises(InflateError, match=r"^x\.so: one more .* past 4294967296 inflated bytes in all$"):
        budget.spend(1, "x.so: one more")
