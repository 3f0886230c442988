"""Session fixtures: the sample kernel built for real (CPU here, CUDA in the CUDA venv),
the local Hub-kernel repository made from it, and a matrix of every variant form."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from support.contract import MATRIX
from support.gpu_stub import with_device_code
from support.helpers import ROOT, SAMPLE, Olah, cuda_python, olah_server, run_cli

ZIG = [sys.executable, "-m", "ziglang", "cc"]
#: pytester: tests/test_hostile_inputs.py runs this conftest's guards in a pytest run of its own.
pytest_plugins = ("pytester",)


def pytest_configure(config: pytest.Config) -> None:
    """A shell starts a background job (`nohup scripts/test.sh &`, some CI runners) with
    SIGINT ignored, and an ignored signal stays ignored across exec: every kernel-wheels
    the tests start would then ignore the Ctrl-C the interrupt tests send it. Python's
    own handler is reset to the default in a child, so installing it here gives each
    child the SIGINT a terminal would."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def shared_folder(tmp_path_factory: pytest.TempPathFactory, name: str,
                  make: Callable[[Path], None]) -> Path:
    """A folder made once per test run, even when pytest-xdist runs the tests in several
    worker processes (each its own session): the first worker to ask makes it under a
    file lock in the run's common base folder, the others wait and reuse it. For the
    expensive session builds (the sample kernel for CPU and CUDA, cross-compiled
    binaries), which no test modifies."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-of-<user>/pytest-<n>/, above each worker's own folder
    folder = base / f"shared-{name}"
    with FileLock(f"{folder}.lock"):
        if not (folder / ".made").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / ".made").touch()
    return folder


@pytest.fixture(scope="session", autouse=True)
def _installer_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """uv (and pip, where it caches) keep what the tests install in a cache of this
    session: every run makes new wheels, which would otherwise pile up in the user's
    ~/.cache for good (tens of GB over many runs). pytest keeps only its last few
    session folders."""
    # One cache for all of a run's xdist workers: torch is unpacked into it once, and the
    # venvs of every worker link to it (both tools lock their caches for concurrent use).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UV_CACHE_DIR", str(shared_folder(tmp_path_factory, "uv-cache", lambda _: None)))
        patch.setenv("PIP_CACHE_DIR", str(shared_folder(tmp_path_factory, "pip-cache", lambda _: None)))
        yield


def _prebuilt(tmp_path_factory: pytest.TempPathFactory, variant: str) -> Path | None:
    """KW_PREBUILT=DIR (a `kernel-wheels build -o DIR` output) skips building the sample
    kernel: for developing other stages while the builder or the kernel is being changed.
    CI never sets it."""
    folder = os.environ.get("KW_PREBUILT")
    if not folder:
        return None
    out = tmp_path_factory.mktemp("prebuilt") / "build" / variant
    shutil.copytree(Path(folder) / "build" / variant, out)
    return out


@pytest.fixture(scope="session")
def cpu_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`kernel-wheels build` of the sample kernel with this venv's torch 2.13.0 (CPU)."""
    if (prebuilt := _prebuilt(tmp_path_factory, "torch213-cxx11-cpu-x86_64-linux")) is not None:
        return prebuilt

    def make(out: Path) -> None:
        subprocess.run([sys.executable, "-m", "kernel_wheels", "build", str(SAMPLE), "-o", str(out)],
                       check=True, capture_output=True, text=True)

    return shared_folder(tmp_path_factory, "cpu-build", make) / "build" / "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture(scope="session")
def cuda_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CUDA variant, built in the torch 2.14.1 (CUDA 13.0) venv with nvcc (no GPU)."""
    if (prebuilt := _prebuilt(tmp_path_factory, "torch214-cxx11-cu130-x86_64-linux")) is not None:
        return prebuilt

    def make(out: Path) -> None:
        proc = subprocess.run([str(cuda_python()), "-m", "kernel_wheels", "build", str(SAMPLE),
                               "-o", str(out), "--backend", "cuda"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr

    return shared_folder(tmp_path_factory, "cuda-build", make) / "build" / "torch214-cxx11-cu130-x86_64-linux"


@pytest.fixture(scope="session")
def build_output(tmp_path_factory: pytest.TempPathFactory, cpu_build: Path,
                 cuda_build: Path) -> Path:
    """Both variants in one Hub layout."""
    out = tmp_path_factory.mktemp("build-output")
    for variant in (cpu_build, cuda_build):
        shutil.copytree(variant, out / "build" / variant.name)
    return out


@pytest.fixture(scope="session")
def kernel_repo(tmp_path_factory: pytest.TempPathFactory, build_output: Path) -> Path:
    """Local Hub kernel repo: tags v1.1.1, v1.1.2, branch v1 (one commit later)."""
    repo = tmp_path_factory.mktemp("repos") / "img2gray"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_kernel_repo.py"),
                    str(build_output), str(repo), "--card", str(SAMPLE / "README.md")],
                   check=True, capture_output=True)
    return repo


@pytest.fixture(scope="session")
def foreign_binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real binaries for other platforms, cross-compiled with zig: an aarch64 Linux .so,
    arm64 macOS ones (min 26.0 as kernel-builder builds Metal, 15.0 as it builds CPU,
    14.0, and 15.4), an x86-64 macOS one, and x86-64 and arm64 Windows DLLs."""
    targets = {
        "linux-aarch64": ("aarch64-linux-gnu.2.28", "ext_aarch64.so"),
        "macos-26": ("aarch64-macos.26.0", "ext_macos26.so"),
        "macos-15": ("aarch64-macos.15.0", "ext_macos15.so"),
        "macos-15.4": ("aarch64-macos.15.4", "ext_macos15_4.so"),
        "macos-14": ("aarch64-macos.14.0", "ext_macos14.so"),
        "macos-x86": ("x86_64-macos.26.0", "ext_macos_x86.so"),
        "windows": ("x86_64-windows-gnu", "ext.pyd"),
        "windows-arm64": ("aarch64-windows-gnu", "ext_arm64.pyd"),
    }

    def make(out: Path) -> None:
        source = out / "ext.c"
        source.write_text("void *PyInit__img2gray_x(void) { return 0; }\n")
        for target, name in targets.values():
            subprocess.run([*ZIG, "-target", target, "-shared", "-O2", "-s", "-o", str(out / name),
                            str(source)], check=True, capture_output=True, cwd=out)

    out = shared_folder(tmp_path_factory, "foreign", make)
    return {key: out / name for key, (_, name) in targets.items()}




@pytest.fixture(scope="session")
def matrix_folder(tmp_path_factory: pytest.TempPathFactory, cpu_build: Path,
                  foreign_binaries: dict[str, Path]) -> Path:
    """A folder `img2gray/build/<variant>/` for every contract row. Each package is
    importable without torch (`VARIANT = name`) and carries a real binary for its
    platform: the sample's CPU .so on Linux x86-64, zig's builds elsewhere."""
    from kernel_wheels.kernel.digest import digest_folder

    root = tmp_path_factory.mktemp("matrix") / "img2gray"
    real_so = next(cpu_build.glob("*.abi3.so"))
    for name, (layout, with_metadata) in MATRIX.items():
        variant = root / "build" / name
        package = variant if layout == "flat" else variant / "img2gray"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f'VARIANT = "{name}"\n')
        (package / "_ops.py").write_text("ops = None\n")
        if name.endswith("x86_64-linux") and "-cu1" in name:
            with_device_code(real_so, package / real_so.name)  # a CUDA build holds device code
        elif name.endswith("x86_64-linux") and "-rocm" in name:  # ... and a ROCm build (#38)
            with_device_code(real_so, package / real_so.name, ("gfx90a", "gfx942"))
        elif name.endswith("x86_64-linux"):
            shutil.copy(real_so, package / real_so.name)
        elif name.endswith("aarch64-linux"):
            shutil.copy(foreign_binaries["linux-aarch64"], package / "_img2gray_x.abi3.so")
        elif name.endswith("darwin"):  # as kernel-builder builds them: Metal 26.0, CPU 15.0
            binary = foreign_binaries["macos-26" if "-metal-" in name else "macos-15"]
            shutil.copy(binary, package / "_img2gray_x.abi3.so")
        elif name.endswith("windows"):
            shutil.copy(foreign_binaries["windows"], package / "_img2gray_x.pyd")
        if layout == "flat":
            (variant / "img2gray").mkdir()
            (variant / "img2gray" / "__init__.py").write_text("from .. import *\n")
        if with_metadata:
            meta = {"name": "img2gray", "id": "_img2gray_x", "version": 1,
                    "license": "apache-2.0",
                    "python-depends": ["einops"] if name == "torch-cuda" else [],
                    "backend": ({"type": "rocm", "archs": ["gfx90a", "gfx942"]} if "-rocm" in name
                                else {"type": "cuda", "archs": ["8.0", "9.0+PTX"]}),
                    "digest": {"algorithm": "sha256", "files": digest_folder(variant)}}
            (variant / "metadata.json").write_text(json.dumps(meta))
    (root / "README.md").write_text("---\nlicense: apache-2.0\n---\n# img2gray\n\nTest matrix.\n")
    (root / "build" / "not-a-variant").mkdir()
    return root


@pytest.fixture(scope="session")
def bad_binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real extension modules that break a promise, compiled here:
    - plain: C++ with std::shared_ptr compiled the plain way (gcc 12, glibc 2.36), so it
      references __libc_single_threaded@GLIBC_2.32;
    - pybind11: a pybind11 module linked against libtorch_python (not limited API);
    - api310: limited API 3.10 (uses PyModule_AddObjectRef, new in 3.10);
    - rpath: an RPATH pointing outside the wheel;
    - noinit: an extension module file without its PyInit_<name> (its $ORIGIN RPATH is fine)."""
    import sysconfig

    import torch.utils.cpp_extension as cpp

    python_include = sysconfig.get_paths()["include"]
    sources = {
        "plain.cpp":
        "#include <memory>\n#include <Python.h>\n"
        "std::shared_ptr<int> keep;\n"
        'extern "C" PyObject* PyInit__plain_ext() {\n'
        "  auto p = std::make_shared<int>(1); keep = p;\n"
        '  static PyModuleDef m = {PyModuleDef_HEAD_INIT, "_plain_ext", nullptr, 0, nullptr};\n'
        "  return PyModule_Create(&m);\n}\n",
        "pyb.cpp":
        "#include <pybind11/pybind11.h>\n"
        "PYBIND11_MODULE(_pyb_ext, m) { m.def(\"add\", [](int a, int b) { return a + b; }); }\n",
        "api310.c":
        "#include <Python.h>\n"
        'static PyModuleDef m = {PyModuleDef_HEAD_INIT, "_api310_ext", NULL, 0, NULL};\n'
        "PyMODINIT_FUNC PyInit__api310_ext(void) {\n"
        "  PyObject *mod = PyModule_Create(&m);\n"
        '  PyModule_AddObjectRef(mod, "none", Py_None);\n  return mod;\n}\n',
        "clean.c":
        "#include <Python.h>\n"
        'static PyModuleDef m = {PyModuleDef_HEAD_INIT, "_rpath_ext", NULL, 0, NULL};\n'
        "PyMODINIT_FUNC PyInit__rpath_ext(void) { return PyModule_Create(&m); }\n"
        "int not_an_init(void) { return 1; }\n",
    }
    torch_lib = cpp.library_paths()[0]
    builds = {
        "plain": ["g++", "-shared", "-fPIC", "-O2", "-DPy_LIMITED_API=0x03090000",
                  f"-I{python_include}", "plain.cpp", "-o", "_plain_ext.abi3.so"],
        "pybind11": ["g++", "-shared", "-fPIC", "-O1", "-std=c++17",
                     *(f"-I{d}" for d in cpp.include_paths()), f"-I{python_include}", "pyb.cpp",
                     "-o", "_pyb_ext.abi3.so", f"-L{torch_lib}", "-Wl,--no-as-needed",
                     "-ltorch_python"],
        "api310": ["gcc", "-shared", "-fPIC", "-O2", "-DPy_LIMITED_API=0x030A0000",
                   f"-I{python_include}", "api310.c", "-o", "_api310_ext.abi3.so"],
        # RPATH to a build machine's folder (outside the wheel)
        "rpath": ["gcc", "-shared", "-fPIC", "-DPy_LIMITED_API=0x03090000", f"-I{python_include}",
                  "clean.c", "-o", "_rpath_ext.abi3.so", "-Wl,-rpath,/opt/build/lib",
                  "-Wl,--disable-new-dtags"],
        # the same code as an extension named _noinit: no PyInit__noinit
        "noinit": ["gcc", "-shared", "-fPIC", "-DPy_LIMITED_API=0x03090000", f"-I{python_include}",
                   "clean.c", "-o", "_noinit.abi3.so", "-Wl,-rpath,$ORIGIN/../img2gray.libs"],
    }

    def make(out: Path) -> None:
        for name, text in sources.items():
            (out / name).write_text(text)
        for cmd in builds.values():
            subprocess.run(cmd, check=True, capture_output=True, cwd=out)

    out = shared_folder(tmp_path_factory, "bad-binaries", make)
    return {key: out / cmd[cmd.index("-o") + 1] for key, cmd in builds.items()}


@pytest.fixture(scope="session")
def olah(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Olah]:
    """olah in offline mode serving local git repos: drbh/img2gray as kernel and model
    repo, drbh/img2gray-model as model repo only, drbh/no-build without build/."""
    root = tmp_path_factory.mktemp("olah")
    repos = root / "mirror"
    shutil.copytree(kernel_repo, repos / "kernels" / "drbh" / "img2gray")
    shutil.copytree(kernel_repo, repos / "models" / "drbh" / "img2gray")
    shutil.copytree(kernel_repo, repos / "models" / "drbh" / "img2gray-model")
    empty = repos / "models" / "drbh" / "no-build"
    empty.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(empty)], check=True)
    (empty / "README.md").write_text("# nothing built\n")
    subprocess.run(["git", "-C", str(empty), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(empty), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "x"], check=True)
    subprocess.run(["git", "-C", str(empty), "tag", "v1.0.0"], check=True)
    with olah_server(root, repos, "models/drbh/img2gray") as server:
        yield server


@pytest.fixture
def hub_env(olah: Olah, tmp_path: Path) -> dict[str, str]:
    """A fresh HF cache and kernel-wheels cache per test, pointed at olah."""
    return {"HF_ENDPOINT": olah.endpoint, "HF_HOME": str(tmp_path / "hf-home"),
            "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


#: What a test run itself leaves in the repository (pytest, hypothesis, the linters).
_RUNNER_FILES = {".pytest_cache", ".hypothesis", "__pycache__", ".mypy_cache", ".ruff_cache", ".coverage"}


def _repo_listing() -> set[str]:
    """The repository's top level and the sample kernel's tree: where a run started in the
    repository (run_cli's default folder) or building the sample would write by mistake."""
    names = {n for n in os.listdir(ROOT) if n not in _RUNNER_FILES and not n.startswith(".coverage")}
    names |= {str(p.relative_to(ROOT)) for p in SAMPLE.rglob("*") if "__pycache__" not in p.parts}
    return names


@pytest.fixture(autouse=True)
def _nothing_written_outside(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Issue #30: every CLI run of a test gets a HOME and a TMPDIR of its own
    (support.helpers.run_cli reads KW_TEST_HOME and KW_TEST_TMP; the XDG cache, config
    and data folders stay the user's, so caches and pip's configuration work as before).
    After the test nothing may be in that HOME (the tool writes only into the folders it
    is given and its caches), none of the tool's temporary folders may be left, and
    nothing may be new in the repository's top level or the sample kernel's tree. Cheap:
    three folders made and a few listings per test."""
    folder = tmp_path_factory.mktemp("cli")
    home, temp = folder / "home", folder / "tmp"
    home.mkdir()
    temp.mkdir()
    before = _repo_listing()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KW_TEST_HOME", str(home))
        patch.setenv("KW_TEST_TMP", str(temp))
        yield
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert not written, f"written into HOME (outside the tool's folders): {written[:10]}"
    # The tool's temporary folders (kernel-wheels-*) are gone when its run ends; what the
    # installers it runs leave there is theirs.
    left = sorted(p.name for p in temp.glob("kernel-wheels-*"))
    assert not left, f"temporary folders left behind: {left[:10]}"
    new = sorted(_repo_listing() - before)
    assert not new, f"written into the repository: {new[:10]}"


# The sample kernel with its CPU build only, as a git repository (`repo`), its wheels, the
# snapshot of its v1 branch, a static site of both, and as a plain folder (`kernel_folder`):
# shared by the tests of several commands' options (test_cli.py, test_install_options.py,
# test_publish_options.py, test_to_wheel_options.py, ...). Each module gets its own.


@pytest.fixture(scope="module")
def repo(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local kernel repository (tags v1.1.1, v1.1.2; branch v1 one rebuild later) with
    the CPU variant only (no CUDA toolchain needed)."""
    output = tmp_path_factory.mktemp("conv-build")
    shutil.copytree(cpu_build, output / "build" / cpu_build.name)
    repo = tmp_path_factory.mktemp("conv-repos") / "img2gray"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_kernel_repo.py"), str(output),
                    str(repo), "--card", str(SAMPLE / "README.md")], check=True, capture_output=True)
    return repo


@pytest.fixture(scope="module")
def wheels(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("conv-wheels")
    run_cli("to-wheel", repo, "1.1.2", "-o", out)
    return out


@pytest.fixture(scope="module")
def snapshot(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of branch v1's rebuild: a snapshot, 1.1.2.post0.devN (a pre-release)."""
    out = tmp_path_factory.mktemp("conv-snapshot")
    run_cli("to-wheel", repo, "1", "-o", out)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def site(wheels: Path, snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("conv-site") / "site"
    run_cli("index", wheels, snapshot, "-o", site)
    return site


@pytest.fixture(scope="module")
def kernel_folder(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain folder holding the sample kernel's CPU build, as `build -o` writes it."""
    root = tmp_path_factory.mktemp("kernel") / "img2gray"
    shutil.copytree(cpu_build, root / "build" / cpu_build.name)
    return root
