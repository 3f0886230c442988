"""`kernel-wheels build` on kernel-builder source trees, run as users run it (the real
CLI in a subprocess, real g++/nvcc, real torch, and Hugging Face's own `kernels` loader).

The test kernels under tests/kernels/ are kernel-wheels' own: kw-stable (stable ABI,
headers in a component's folders, flag scoping, pyext data), kw-to-chars (a libstdc++
symbol newer than manylinux_2_28), kw-noarch (pure Python) and kw-cuda (CUDA + CPU,
CUTLASS from PyPI, a capability CUDA 13 cannot build). CUDA builds run in the CUDA
venv and are kept few and narrow: nvcc is slow on this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_wheels.building.cuda_archs import gencode_flags, loose_intersection, plan_archs
from kernel_wheels.building.symbol_versions import over_limit
from kernel_wheels.kernel.digest import digest_folder
from support.elf_oracle import dynamic_symbols
from support.helpers import SAMPLE, cuda_python, run_cli

KERNELS = Path(__file__).parent / "kernels"
CPU_STABLE = "torch-stable-abi211-cpu-x86_64-linux"
CUDA_STABLE = "torch-stable-abi211-cu130-x86_64-linux"


def build(source: Path, out: Path, *args: str, cache: Path, python: Path | None = None,
          timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`kernel-wheels build SOURCE -o OUT ARGS` with its own object cache."""
    command = [str(python or sys.executable), "-m", "kernel_wheels", "build", str(source),
               "-o", str(out), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "KERNEL_WHEELS_CACHE": str(cache)})


def built(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stderr
    return proc


def load_and_run(build_output: Path, code: str) -> str:
    """Run ``code`` with ``kernel`` = kernels.get_local_kernel(build_output)."""
    program = ("import sys, torch\nfrom pathlib import Path\nfrom kernels import get_local_kernel\n"
               "kernel = get_local_kernel(Path(sys.argv[1]))\n" + code)
    proc = subprocess.run([sys.executable, "-c", program, str(build_output)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def cuobjdump() -> str:
    venv = cuda_python().parent.parent
    found = [shutil.which("cuobjdump"),
             *map(str, venv.glob("lib/python*/site-packages/triton/backends/nvidia/bin/cuobjdump"))]
    return next(f for f in found if f)


def sass_and_ptx(so: Path) -> tuple[set[str], set[str]]:
    elf = subprocess.run([cuobjdump(), "--list-elf", str(so)], capture_output=True, text=True).stdout
    ptx = subprocess.run([cuobjdump(), "--list-ptx", str(so)], capture_output=True, text=True).stdout
    return ({w.split(".")[-2] for w in elf.split() if w.endswith(".cubin")},
            {w.split(".")[-2] for w in ptx.split() if w.endswith(".ptx")})


def copy_kernel(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(KERNELS / name, target)
    return target


# --- session builds ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kw-cache")


@pytest.fixture(scope="session")
def stable_build(tmp_path_factory: pytest.TempPathFactory, build_cache: Path) -> Path:
    out = tmp_path_factory.mktemp("kw-stable")
    built(build(KERNELS / "kw-stable", out, cache=build_cache))
    return out


@pytest.fixture(scope="session")
def noarch_build(tmp_path_factory: pytest.TempPathFactory, build_cache: Path) -> Path:
    out = tmp_path_factory.mktemp("kw-noarch")
    built(build(KERNELS / "kw-noarch", out, cache=build_cache))
    return out


@pytest.fixture(scope="session")
def cuda_features_build(tmp_path_factory: pytest.TempPathFactory,
                        build_cache: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """kw-cuda built in the CUDA venv for kernel-builder's full capability set."""
    out = tmp_path_factory.mktemp("kw-cuda")
    proc = built(build(KERNELS / "kw-cuda", out, cache=build_cache, python=cuda_python()))
    return out, proc


# --- build.toml ---------------------------------------------------------------------------

MINIMAL = """\
[general]
name = "kw-keys"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[torch-noarch]
"""


def write_tree(root: Path, toml: str) -> Path:
    (root / "torch-ext" / "kw_keys").mkdir(parents=True)
    (root / "torch-ext" / "kw_keys" / "__init__.py").write_text("")
    (root / "build.toml").write_text(toml)
    return root


@pytest.mark.parametrize("change, message", [
    (MINIMAL + "pyext = [\"py\"]\nfrobnicate = true\n",
     "build.toml: [torch-noarch] frobnicate is not a build.toml key (kernel-builder's edition 5 has "
     "no such key): remove or correct it"),
    (MINIMAL.replace("backends", "universal = false\nbackends"),
     "build.toml: [general] universal is kernel-builder's editions 1-2 form, which kernel-builder no "
     "longer reads either: migrate the file with `kernel-builder update-build` (edition 5)"),
    (MINIMAL.replace("edition = 5\n", "") + "\n[general.tpu]\npython-depends = []\n",
     "build.toml: [general] tpu needs edition 5: add `edition = 5` to [general]"),
    (MINIMAL.replace('license = "Apache-2.0"\n', ""),
     "build.toml: [general] license is missing (kernel-builder requires it)"),
    (MINIMAL.replace("version = 1", 'version = "1"'),
     "build.toml: [general] version must be a whole number, not '1'"),
    (MINIMAL.replace('"cpu"]', '"cpu", "tensorcore"]'),
     "build.toml: [general] backends 'tensorcore' is not a backend (one of cann, cpu, cuda, metal, "
     "neuron, rocm, tpu, xpu)"),
    (MINIMAL.replace("[torch-noarch]\n", '[torch]\nsrc = []\n\n[kernel.k]\nbackend = "cpu"\n'
                     'depends = ["torch"]\nsrc = []\ncuda-flags = ["-G"]\n'),
     "build.toml: [kernel.k] cuda-flags is a key of cuda kernels, not of a cpu kernel"),
    (MINIMAL.replace("[torch-noarch]\n", '[torch]\nsrc = []\n\n[kernel.k]\nbackend = "cpu"\n'
                     'depends = ["boost"]\nsrc = []\n'),
     "build.toml: [kernel.k] depends 'boost' is not a dependency kernel-builder knows (known: "
     "cutlass_2_10, cutlass_3_5, cutlass_3_6, cutlass_3_8, cutlass_3_9, cutlass_4_0, cutlass_4_4, "
     "cutlass_4_5, metal-cpp, sycl_tla, torch)"),
    (MINIMAL.replace("backends", 'python-depends = ["numpy"]\nbackends'),
     "build.toml: [general] python-depends 'numpy' is not a python-depends name kernel-builder knows "
     "in general (known: einops, helion, tvm-ffi)"),
    (MINIMAL + "\n[extras]\nx = 1\n",
     "build.toml: [extras] is not a build.toml table (kernel-builder's edition 5 has [general], "
     "[torch], [torch-noarch], [tvm-ffi] and [kernel.<id>])"),
    (MINIMAL.replace("[torch-noarch]\n", ""),
     "build.toml: [torch], [torch-noarch] or [tvm-ffi] is missing: build.toml needs exactly one "
     "framework section"),
])
def test_unknown_or_unsupported_keys_are_refused_by_name(tmp_path: Path, change: str,
                                                         message: str) -> None:
    tree = write_tree(tmp_path / "tree", change)
    proc = run_cli("build", tree, "-o", tmp_path / "out", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"kernel-wheels: error: {message}"
    assert not (tmp_path / "out").exists()


def test_tvm_ffi_kernels_need_apache_tvm_ffi(tmp_path: Path) -> None:
    """tests/test_build_tvm_ffi.py builds them; the CUDA venv has no apache-tvm-ffi."""
    toml = MINIMAL.replace("[torch-noarch]\n", '[tvm-ffi]\nsrc = []\n\n[kernel.k]\nbackend = "cpu"\n'
                           'depends = []\nsrc = ["k.cpp"]\n')
    tree = write_tree(tmp_path / "tree", toml)
    (tree / "tvm-ffi-ext" / "kw_keys").mkdir(parents=True)
    (tree / "tvm-ffi-ext" / "kw_keys" / "__init__.py").write_text("")
    (tree / "k.cpp").write_text("")
    proc = build(tree, tmp_path / "out", cache=tmp_path / "cache", python=cuda_python())
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "kernel-wheels: error: nothing to build for kw-keys in this environment (cpu: apache-tvm-ffi "
        "is not installed in this Python environment)")


def test_torch_version_bounds(tmp_path: Path) -> None:
    tree = copy_kernel("kw-stable", tmp_path)
    toml = (tree / "build.toml").read_text().replace("[torch]\n", '[torch]\nmaxver = "2.12"\n')
    (tree / "build.toml").write_text(toml)
    proc = run_cli("build", tree, "-o", tmp_path / "out", check=False)
    assert proc.returncode == 1
    assert "kernel-wheels: error: [torch] maxver is 2.12: this torch 2.13.0+cpu is too new" in proc.stderr


def test_ops_registered_outside_the_namespace_are_refused(tmp_path: Path) -> None:
    """kernel-builder's check: Python op registrations must use add_op_namespace_prefix."""
    tree = copy_kernel("kw-noarch", tmp_path)
    init = tree / "torch-ext" / "kw_noarch" / "__init__.py"
    init.write_text(init.read_text().replace('add_op_namespace_prefix("halve")', '"kwns::halve"'))
    proc = run_cli("build", tree, "-o", tmp_path / "out", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "kernel-wheels: error: torch ops registered outside the kernel's namespace (use "
        "add_op_namespace_prefix from ._ops): torch-ext/kw_noarch/__init__.py:10 function _halve")


def test_dependency_that_cannot_be_fetched_names_what_to_set(tmp_path: Path) -> None:
    """CUTLASS 3.9.2 is not on PyPI: its archive comes from the mirror named here, which
    nothing answers (tests/test_build_depends.py serves real archives)."""
    tree = copy_kernel("kw-stable", tmp_path)
    toml = (tree / "build.toml").read_text().replace('depends = ["torch"]', 'depends = ["torch", "cutlass_3_9"]')
    (tree / "build.toml").write_text(toml)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    proc = run_cli("build", tree, "-o", tmp_path / "out", check=False,
                   env={"CUTLASS_SRC_DIR": "", "KERNEL_WHEELS_CUTLASS_URL": url,
                        "KERNEL_WHEELS_RETRIES": "0", "KERNEL_WHEELS_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 1
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("kernel-wheels: error: [kernel.scale_cpu] depends on cutlass_3_9 (CUTLASS "
                            f"3.9.2): could not download CUTLASS 3.9.2 from {url}/v3.9.2.tar.gz (")
    assert error.endswith(") after 1 try; or set CUTLASS_SRC_DIR to a CUTLASS 3.9.2 source checkout")
    assert not (tmp_path / "out" / "build" / CPU_STABLE).exists()
    assert list((tmp_path / "cache" / "build-depends").iterdir()) == []


# --- CUDA capabilities (kernel-builder's rules, checked without nvcc) ----------------------

CUDA13 = ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1")


@pytest.mark.parametrize("requested, expected", [
    (["8.0", "9.0+PTX"], ["8.0", "9.0+PTX"]),            # the sample kernel
    (["5.0", "7.5", "8.0", "9.0"], ["7.5", "8.0", "9.0"]),  # relu-archs-subset: 5.0 runs nowhere
    (["7.5", "10.1", "12.0"], ["7.5", "12.0"]),          # 10.1: not a CUDA 13 capability
    (["8.6"], ["8.6"]),
    (["9.0a"], ["9.0a"]),                                # arch-specific code for 9.0 only
    (["99999.0"], []),                                   # relu-invalid-capability
])
def test_capabilities_kept_for_cuda_13(requested: list[str], expected: list[str]) -> None:
    assert loose_intersection(requested, CUDA13) == expected


def test_gencode_and_narrowing() -> None:
    assert gencode_flags(["9.0+PTX", "8.0"]) == [
        "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90"]
    default = (*CUDA13[:-1], "12.1+PTX")
    plan = plan_archs(default, CUDA13, ("9.0",))
    assert plan.narrowed and plan.targets == ("9.0",)
    assert plan.for_component("[kernel.k]", None, "13.0") == ["9.0"]
    assert plan.for_component("[kernel.k]", ("8.0", "9.0"), "13.0") == ["9.0"]
    with pytest.raises(Exception, match=r"\[kernel.k\]: no CUDA capability left: none of its "
                       r"cuda-capabilities \(12.0\) can run on the archs asked for \(9.0\)"):
        plan.for_component("[kernel.k]", ("12.0",), "13.0")
    assert plan_archs(default, CUDA13).for_component("[kernel.k]", None, "13.0") == list(default)


# --- noarch ---------------------------------------------------------------------------------


def test_noarch_variants_as_kernel_builder_writes_them(noarch_build: Path) -> None:
    variants = sorted(p.name for p in (noarch_build / "build").iterdir())
    assert variants == ["torch-cpu", "torch-cuda"]
    cuda = noarch_build / "build" / "torch-cuda"
    meta = json.loads((cuda / "metadata.json").read_text())
    assert meta["id"].startswith("_kw_noarch_cuda_") and meta["version"] == 3
    assert meta["backend"] == {"type": "cuda", "archs": ["8.0", "9.0"]}
    assert meta["python-depends"] == ["nvidia-cutlass-dsl"]  # [general.cuda] only
    assert json.loads((noarch_build / "build" / "torch-cpu" / "metadata.json").read_text())[
        "python-depends"] == []
    assert meta["digest"]["files"] == digest_folder(cuda)
    assert not list(cuda.rglob("*.so"))


def test_noarch_kernel_loads_runs_converts_and_checks(noarch_build: Path, tmp_path: Path) -> None:
    out = load_and_run(noarch_build, "print(kernel.halve(torch.tensor([4.0, 6.0])).tolist())\n"
                                     "print(kernel._ops._OPS_NAME)")
    values, namespace = out.splitlines()
    assert values == "[2.0, 3.0]"
    assert namespace.startswith("_kw_noarch_cpu_")  # the namespace of the backend torch runs on
    run_cli("to-wheel", noarch_build, "3.0.0", "-o", tmp_path / "wheels")
    wheels = sorted(p.name for p in (tmp_path / "wheels").iterdir())
    assert wheels == ["kw_noarch-3.0.0+cpu-py3-none-any.whl", "kw_noarch-3.0.0+cuda-py3-none-any.whl"]
    run_cli("check", *(tmp_path / "wheels").iterdir())


# --- stable ABI, include folders, flags, data files ------------------------------------------


def test_stable_abi_variant_layout(stable_build: Path) -> None:
    """kw-stable builds only if the [torch] binding finds scale_api.h (in the component's
    source folder) and kw/limits.h (in its include folder), and if each cxx-flags list
    reaches its own sources only (the sources #error otherwise)."""
    variant = stable_build / "build" / CPU_STABLE
    assert [p.name for p in (stable_build / "build").iterdir()] == [CPU_STABLE]
    files = sorted(p.relative_to(variant).as_posix() for p in variant.rglob("*") if p.is_file())
    so = next(f for f in files if f.endswith(".abi3.so"))
    assert files == sorted([so, "__init__.py", "_ops.py", "data/defaults.json", "kw_stable.py",
                            "metadata.json"])  # notes.txt is not a pyext file; no compat package
    meta = json.loads((variant / "metadata.json").read_text())
    assert meta["backend"] == {"type": "cpu"} and meta["id"] == so.split(".")[0]
    symbols = dynamic_symbols(variant / so)
    assert f"PyInit_{meta['id']}" in symbols.defined
    assert sorted(symbols.defined) == [f"PyInit_{meta['id']}"]  # nothing else is exported
    assert over_limit(symbols.versioned_imports) == []


def test_stable_abi_kernel_loads_and_runs(stable_build: Path) -> None:
    out = load_and_run(stable_build, """
x = torch.arange(6, dtype=torch.float32)
assert torch.equal(kernel.scale(x), x * 2.5), kernel.scale(x)
assert torch.equal(kernel.scale(x, 3.0), x * 3.0)
try:
    kernel.scale(x, 5000.0)
except RuntimeError as exc:
    print(str(exc).splitlines()[0])
""")
    assert "scale: factor above 1000" in out


# --- newer libstdc++ inside manylinux_2_28 ------------------------------------------------------


def test_to_chars_kernel_stays_manylinux_2_28_and_runs(tmp_path: Path, build_cache: Path) -> None:
    proc = built(build(KERNELS / "kw-to-chars", tmp_path / "out", cache=build_cache))
    assert "linked statically from libstdc++.a (GLIBCXX_3.4.29, newer than manylinux_2_28 allows)" \
        in proc.stderr
    variant = tmp_path / "out" / "build" / CPU_STABLE
    so = next(variant.glob("*.abi3.so"))
    symbols = dynamic_symbols(so)
    assert over_limit(symbols.versioned_imports) == []
    assert not [s for s, _ in symbols.versioned_imports if "to_chars" in s]
    assert sorted(symbols.defined) == [f"PyInit_{so.name.split('.')[0]}"]  # to_chars not exported
    run_cli("to-wheel", tmp_path / "out", "1.0.0", "-o", tmp_path / "wheels")
    wheel = next((tmp_path / "wheels").iterdir())
    assert wheel.name.endswith("-manylinux_2_28_x86_64.whl")
    assert run_cli("check", wheel).returncode == 0
    out = load_and_run(tmp_path / "out", """
for value in (0.1, 1 / 3, 2.5e-08, 1e300, 123456.0):
    text = kernel.shortest_text(value)
    assert float(text) == value, (value, text)
    print(text)
""")
    assert out.split() == ["0.1", "0.3333333333333333", "2.5e-08", "1e+300", "123456"]


# --- parallel, incremental, fail fast, interrupts ------------------------------------------------


def test_incremental_rebuild_compiles_only_what_changed(tmp_path: Path) -> None:
    tree = copy_kernel("kw-stable", tmp_path)
    cache = tmp_path / "cache"
    first = built(build(tree, tmp_path / "out", cache=cache))
    assert "[1/2]" in first.stderr and "[2/2]" in first.stderr and "(unchanged)" not in first.stderr
    so = next((tmp_path / "out" / "build" / CPU_STABLE).glob("*.so"))
    before = so.read_bytes()
    again = built(build(tree, tmp_path / "out2", cache=cache))
    assert again.stderr.count("(unchanged)") == 2
    assert next((tmp_path / "out2" / "build" / CPU_STABLE).glob("*.so")).read_bytes() == before
    # A Python-only edit changes the ops namespace: only the file that uses it compiles.
    init = tree / "torch-ext" / "kw_stable" / "__init__.py"
    init.write_text(init.read_text() + "\n# edited\n")
    renamed = built(build(tree, tmp_path / "out3", cache=cache))
    assert "scale_cpu/scale.cpp (unchanged)" in renamed.stderr
    assert "torch-ext/torch_binding.cpp (unchanged)" not in renamed.stderr
    # A header both files include: both compile again.
    header = tree / "scale_cpu" / "include" / "kw" / "limits.h"
    header.write_text(header.read_text().replace("1000.0", "999.0"))
    rebuilt = built(build(tree, tmp_path / "out4", cache=cache))
    assert "(unchanged)" not in rebuilt.stderr


SLOW_SOURCE = """\
// Slow to compile on purpose (constant evaluation, about 15 s), quick to run.
constexpr unsigned long mix(unsigned long seed) {
  unsigned long s = seed;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 100000; ++j) s = s * 6364136223846793005UL + static_cast<unsigned long>(i ^ j);
  return s;
}
static_assert(mix(1) != 1);
static_assert(mix(2) != 1);
static_assert(mix(3) != 1);
int kw_slow() { return 1; }
"""


def slow_kernel(tmp_path: Path, broken: bool) -> Path:
    """kw-stable plus a component file that takes long to compile and,
    if ``broken``, one that fails at once."""
    tree = copy_kernel("kw-stable", tmp_path)
    (tree / "scale_cpu" / "slow.cpp").write_text(SLOW_SOURCE)
    sources = ['"scale_cpu/slow.cpp"']
    if broken:
        (tree / "scale_cpu" / "broken.cpp").write_text('#error "kw: this file does not compile"\n')
        sources.append('"scale_cpu/broken.cpp"')
    toml = (tree / "build.toml").read_text().replace(
        'src = ["scale_cpu/scale.cpp", ', f'src = [{", ".join(sources)}, "scale_cpu/scale.cpp", ')
    (tree / "build.toml").write_text(toml)
    return tree


def compilers_running(marker: Path) -> list[str]:
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if str(marker) in line and "-m kernel_wheels" not in line]


def compiled_objects(cache: Path) -> list[str]:
    """The sources whose compiles finished: each one's object goes into the object cache
    (``build-objects/<key>/<entry>/inputs.json`` lists what the compiler read)."""
    return sorted(json.loads(manifest.read_text())["inputs"][0]["path"]
                  for manifest in (cache / "build-objects").rglob("inputs.json"))


def test_first_compile_error_stops_the_build(tmp_path: Path) -> None:
    tree = slow_kernel(tmp_path, broken=True)
    proc = build(tree, tmp_path / "out", "-j", "4", cache=tmp_path / "cache")
    assert proc.returncode == 1
    assert "kernel-wheels: error: compiling scale_cpu/broken.cpp failed (exit 1):" in proc.stderr
    assert "kw: this file does not compile" in proc.stderr
    assert "Traceback" not in proc.stderr
    # The slow file (about 20 s alone) was stopped, not waited for: its compile never
    # finished (a finished compile leaves its object in the object cache).
    finished = compiled_objects(tmp_path / "cache")
    assert not [path for path in finished if path.endswith("slow.cpp")], "the slow file was waited for"
    assert compilers_running(tree) == []
    assert not (tmp_path / "out" / "build").exists() or not any((tmp_path / "out" / "build").iterdir())
    assert list((tmp_path / "cache" / "build-work").iterdir()) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_leaves_no_work_folder(tmp_path: Path, signum: int) -> None:
    tree = slow_kernel(tmp_path, broken=False)
    cache = tmp_path / "cache"
    process = subprocess.Popen(
        [sys.executable, "-m", "kernel_wheels", "build", str(tree), "-o", str(tmp_path / "out")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "KERNEL_WHEELS_CACHE": str(cache)})
    while not compilers_running(tree):
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    assert list((cache / "build-work").iterdir())  # the work folder exists while it runs
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr.strip().endswith("kernel-wheels: interrupted")
    assert list((cache / "build-work").iterdir()) == []
    assert compilers_running(tree) == []
    out_build = tmp_path / "out" / "build"
    assert not out_build.exists() or list(out_build.iterdir()) == []


# --- errors in the sample kernel (moved from test_sample_kernel.py) --------------------------------


def test_build_errors_are_one_line(tmp_path: Path) -> None:
    proc = run_cli("build", tmp_path, "-o", tmp_path / "out", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"kernel-wheels: error: {tmp_path} is not a kernel source tree: it has no build.toml"
    proc = run_cli("build", SAMPLE, "-o", tmp_path / "out", "--backend", "cuda", check=False)
    assert proc.returncode == 1 and "cannot build cuda: torch 2.13.0+cpu is not a CUDA build" in proc.stderr
    assert not (tmp_path / "out" / "build").exists() or not any((tmp_path / "out" / "build").iterdir())


def test_compile_error_reports_compiler_output(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(SAMPLE, broken)
    (broken / "csrc" / "img2gray_cpu.cpp").write_text("this is not C++;\n")
    proc = run_cli("build", broken, "-o", tmp_path / "out", check=False,
                   env={"KERNEL_WHEELS_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 1
    assert "error: compiling csrc/img2gray_cpu.cpp failed" in proc.stderr
    assert "error: expected unqualified-id before" in proc.stderr  # the compiler's own words
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "build" / "torch213-cxx11-cpu-x86_64-linux").exists()


def test_sample_kernel_progress_lines(cpu_build: Path, tmp_path: Path) -> None:
    """One line per compiled file, and a summary of every backend."""
    proc = run_cli("build", SAMPLE, "-o", tmp_path / "out")
    lines = proc.stderr.splitlines()
    assert any(line.strip().startswith("cpu: [1/2] ") for line in lines)
    assert any(line.strip().startswith("cpu: [2/2] ") for line in lines)
    assert lines[-1] == "img2gray: 1 built, 1 skipped, 0 failed"
    assert proc.stdout.strip() == str(tmp_path / "out" / "build" / cpu_build.name)


# --- CUDA (in the CUDA venv: nvcc 13.0, torch 2.14.1) ----------------------------------------------


def test_cuda_capabilities_depends_and_both_backends(
        cuda_features_build: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    out, proc = cuda_features_build
    assert sorted(p.name for p in (out / "build").iterdir()) == [CPU_STABLE, CUDA_STABLE]
    assert "cutlass_3_5: nvidia-cutlass 3.5.1.0" in proc.stderr
    variant = out / "build" / CUDA_STABLE
    meta = json.loads((variant / "metadata.json").read_text())
    # 10.1 is not a CUDA 13 capability: left out, as kernel-builder does
    assert meta["backend"] == {"type": "cuda", "archs": ["12.0", "7.5"]}
    so = next(variant.glob("*.abi3.so"))
    assert sass_and_ptx(so) == ({"sm_75", "sm_120"}, set())
    symbols = dynamic_symbols(so)
    assert over_limit(symbols.versioned_imports) == []  # dlsym bound to GLIBC_2.2.5
    assert ("dlsym", "GLIBC_2.2.5") in symbols.versioned_imports
    run_cli("to-wheel", out, "1.0.0", "-o", tmp_path / "wheels")
    assert run_cli("check", *(tmp_path / "wheels").iterdir()).returncode == 0


def test_cuda_arch_narrowing_recompiles_only_cuda_code(
        cuda_features_build: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path,
        build_cache: Path) -> None:
    proc = built(build(KERNELS / "kw-cuda", tmp_path / "out", "--backend", "cuda", "--arch", "12.0",
                       cache=build_cache, python=cuda_python()))
    assert "cuda: [1/2] torch-ext/torch_binding.cpp (unchanged)" in proc.stderr
    assert "fill_cuda/fill.cu (unchanged)" not in proc.stderr
    variant = tmp_path / "out" / "build" / CUDA_STABLE
    assert json.loads((variant / "metadata.json").read_text())["backend"]["archs"] == ["12.0"]
    assert sass_and_ptx(next(variant.glob("*.abi3.so"))) == ({"sm_120"}, set())


def test_failing_backend_does_not_stop_the_others(tmp_path: Path, build_cache: Path) -> None:
    """cuda is listed first and fails; cpu still builds; the exit status says it failed."""
    tree = copy_kernel("kw-cuda", tmp_path)
    (tree / "fill_cuda" / "fill.cu").write_text('#error "kw: broken CUDA source"\n')
    proc = build(tree, tmp_path / "out", "--arch", "12.0", cache=build_cache, python=cuda_python())
    assert proc.returncode == 1
    assert "cuda: failed: compiling fill_cuda/fill.cu failed (exit" in proc.stderr
    assert "kw: broken CUDA source" in proc.stderr
    assert "kw-cuda: 1 built, 0 skipped, 1 failed" in proc.stderr
    assert proc.stdout.strip() == str(tmp_path / "out" / "build" / CPU_STABLE)
    assert not (tmp_path / "out" / "build" / CUDA_STABLE).exists()


def test_an_interrupt_while_a_compiler_starts_waits_until_it_is_recorded() -> None:
    """The window the interrupt tests cannot hit on purpose (an interrupt inside Popen,
    after the fork): a signal that lands while a compiler is being started and recorded
    is handled right after, so the finally that stops recorded compilers sees it."""
    from kernel_wheels.building.scheduler import _signals_held

    recorded = []
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in the CLI: Ctrl-C raises
    try:
        with pytest.raises(KeyboardInterrupt), _signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)  # the handler would have run by now, were the signal not held
            recorded.append("compiler")
        assert recorded == ["compiler"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back
    finally:
        signal.signal(signal.SIGINT, outer)
