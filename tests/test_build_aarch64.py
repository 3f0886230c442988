"""`kernel-wheels build --target-arch aarch64` from this x86_64 machine (issue #23): a CPU
kernel compiled with Debian's cross compiler (g++-aarch64-linux-gnu) against torch's
aarch64 wheel (fetched from PyPI by the builder), tagged manylinux_2_28_aarch64, proven
by `check` (ELF machine and symbol versions), and its op run under qemu user emulation
(qemu-user). scripts/test.sh installs both Debian packages.

Running the op needs torch's aarch64 runtime without an aarch64 Python (none can be
installed here): a small C++ program, cross-compiled, loads the extension as Python
would (its static registrations run), finds the op in torch's dispatcher and calls it.
torch's aarch64 wheel on PyPI is a CUDA build whose libtorch_cpu.so needs libcudart and
libcupti at load time (never called by a CPU op): the real aarch64 libraries come from
their PyPI wheels too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from kernel_wheels.building.symbol_versions import over_limit
from support.elf_oracle import dynamic_symbols
from support.helpers import run_cli

KERNELS = Path(__file__).parent / "kernels"
VARIANT = "torch-stable-abi211-cpu-aarch64-linux"
CROSS = "aarch64-linux-gnu-g++"
QEMU = "qemu-aarch64"
SYSROOT = Path("/usr/aarch64-linux-gnu")  # the cross libc of Debian's libc6-dev-arm64-cross
#: torch 2.13's aarch64 libtorch_cpu.so links these CUDA 13.0 runtime libraries
CUDA_RUNTIME = {"nvidia-cuda-runtime==13.0.96": "manylinux_2_17_aarch64",
                "nvidia-cuda-cupti==13.0.85": "manylinux_2_25_aarch64"}

RUN_OP = r"""
// Load a kw-to-chars extension (its static registrations run, as on import) and call
// its op through torch's dispatcher: the shortest text of a few doubles.
#include <dlfcn.h>
#include <cstdio>
#include <string>
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

int main(int argc, char** argv) {
  // RTLD_LAZY: the extension's PyInit calls Python, which this program never does.
  if (argc != 3 || !dlopen(argv[1], RTLD_LAZY | RTLD_GLOBAL)) {
    std::fprintf(stderr, "usage: run_op EXTENSION NAMESPACE (%s)\n", argc == 3 ? dlerror() : "");
    return 2;
  }
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow((std::string(argv[2]) + "::shortest_text").c_str(), "");
  for (double value : {0.1, 1.0 / 3, 2.5e-08, 1e300, 123456.0}) {
    at::Tensor out = at::zeros({32}, at::kByte);
    torch::jit::Stack stack{out, at::full({1}, value, at::kDouble)};
    op.callBoxed(&stack);
    std::printf("%.*s\n", static_cast<int>(stack[0].toInt()), static_cast<const char*>(out.data_ptr()));
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def cross_tools() -> None:
    missing = [tool for tool in (CROSS, QEMU) if shutil.which(tool) is None]
    assert not missing, (f"{', '.join(missing)} missing: scripts/test.sh installs the Debian packages "
                         "g++-aarch64-linux-gnu and qemu-user")


@pytest.fixture(scope="module")
def aarch64_build(cross_tools: None, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """kw-to-chars for aarch64; returns the output, the kernel-wheels cache and the run."""
    out, cache = tmp_path_factory.mktemp("kw-to-chars-aarch64"), tmp_path_factory.mktemp("cache")
    proc = run_cli("build", KERNELS / "kw-to-chars", "-o", out, "--target-arch", "aarch64",
                   check=False, env={"KERNEL_WHEELS_CACHE": str(cache)})
    assert proc.returncode == 0, proc.stderr
    return out, cache, proc


def test_the_extension_is_aarch64_and_within_manylinux_2_28(
        aarch64_build: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    out, _, proc = aarch64_build
    assert proc.stdout.strip() == str(out / "build" / VARIANT)
    assert "fetching torch==2.13.0 for manylinux_2_28_aarch64 (headers and libraries)" in proc.stderr
    # the cross libstdc++.a's std::to_chars, linked statically as on x86_64
    assert "cpu: linked statically from libstdc++.a (GLIBCXX_3.4.29, newer than manylinux_2_28 " \
           "allows)" in proc.stderr
    so = next((out / "build" / VARIANT).glob("*.abi3.so"))
    with so.open("rb") as stream:
        assert ELFFile(stream).header["e_machine"] == "EM_AARCH64"
    symbols = dynamic_symbols(so)
    assert over_limit(symbols.versioned_imports) == []
    assert sorted(symbols.defined) == [f"PyInit_{so.name.split('.')[0]}"]


def test_the_wheel_is_tagged_manylinux_2_28_aarch64_and_passes_check(
        aarch64_build: tuple[Path, Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    out, _, _ = aarch64_build
    run_cli("to-wheel", out, "1.0.0", "-o", tmp_path / "wheels")
    wheel = next((tmp_path / "wheels").iterdir())
    assert wheel.name == "kw_to_chars-1.0.0+torchstableabi211cpu-cp39-abi3-manylinux_2_28_aarch64.whl"
    report = run_cli("check", "-v", wheel).stdout
    assert report.startswith(f"PASS {wheel.name}") and "fail:" not in report
    assert "pass: [manylinux] manylinux_2_28_aarch64 holds" in report
    # check proves the machine: the same binary in a wheel tagged x86_64 fails
    x86 = tmp_path / wheel.name.replace("aarch64", "x86_64")
    shutil.copy(wheel, x86)
    proc = run_cli("check", "-v", x86, check=False)
    assert proc.returncode == 1 and "is AARCH64 but the wheel is tagged x86_64" in proc.stdout


def _cuda_runtime(folder: Path) -> Path:
    """libcudart.so.13 and libcupti.so.13 for aarch64, from their PyPI wheels."""
    libraries = folder / "lib"
    libraries.mkdir(parents=True)
    for requirement, platform_tag in CUDA_RUNTIME.items():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--platform", platform_tag, "--python-version", "3.11", "--implementation", "cp",
                        "-d", str(folder), requirement], check=True, capture_output=True, timeout=600)
    for wheel in folder.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.rsplit("/", 1)[-1] in ("libcudart.so.13", "libcupti.so.13"):
                    (libraries / name.rsplit("/", 1)[-1]).write_bytes(archive.read(name))
    return libraries


def test_the_op_runs_under_qemu(aarch64_build: tuple[Path, Path, subprocess.CompletedProcess[str]],
                                tmp_path: Path) -> None:
    out, cache, _ = aarch64_build
    torch = next((cache / "build-torch").glob("torch-2.13.0-*-manylinux_2_28_aarch64*")) / "torch"
    cuda = _cuda_runtime(tmp_path / "cuda")
    (tmp_path / "run_op.cpp").write_text(RUN_OP)
    subprocess.run([CROSS, "-std=gnu++20", "-O1", "-D_GLIBCXX_USE_CXX11_ABI=1", f"-I{torch / 'include'}",
                    "-o", str(tmp_path / "run_op"), str(tmp_path / "run_op.cpp"), f"-L{torch / 'lib'}",
                    "-lc10", "-ltorch_cpu", f"-Wl,-rpath-link,{torch / 'lib'}:{cuda}"],
                   check=True, capture_output=True, timeout=600)
    so = next((out / "build" / VARIANT).glob("*.abi3.so"))
    proc = subprocess.run([QEMU, "-L", str(SYSROOT), str(tmp_path / "run_op"), str(so), so.name.split(".")[0]],
                          capture_output=True, text=True, timeout=600,
                          env={"LD_LIBRARY_PATH": f"{torch / 'lib'}:{cuda}", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0.1", "0.3333333333333333", "2.5e-08", "1e+300", "123456"]


def test_a_cross_build_compiles_cpu_kernels_only(cross_tools: None, tmp_path: Path) -> None:
    proc = run_cli("build", KERNELS / "kw-cuda", "-o", tmp_path / "out", "--target-arch", "aarch64",
                   "--backend", "cuda", check=False, env={"KERNEL_WHEELS_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "kernel-wheels: error: cannot build cuda: a build for aarch64 on this x86_64 machine "
        "(--target-arch) compiles cpu kernels against torch only")
