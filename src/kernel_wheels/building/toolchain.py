"""The torch, C++ compiler and CUDA toolkit a build uses, found without importing torch.

Reading ``torch/version.py`` and torch's file layout instead of importing it keeps a
build free of torch's import time and warnings, and lets noarch kernels build in an
environment without torch at all.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .. import data
from ..errors import BuildError
from ..kernel.gpu_archs import parse_code_name
from .config import version_tuple
from .environment import tool_environment


@dataclass(frozen=True)
class TorchEnv:
    torch_version: str  # "2.13.0+cpu"
    major_minor: tuple[int, int]
    cxx11_abi: bool
    cuda_version: str | None  # torch.version.cuda, None for CPU builds
    root: Path  # the torch package folder
    include_dirs: tuple[Path, ...]
    library_dirs: tuple[Path, ...]
    python_include: Path
    cpu_arch: str

    @property
    def site_packages(self) -> Path:
        return self.root.parent

    def variant_name(self, backend_tag: str, stable_abi: str | None = None) -> str:
        """kernel-builder's names: ``torch213-cxx11-cpu-x86_64-linux``; a stable-ABI build
        is named after the torch version it targets and has no C++ ABI part."""
        if stable_abi is not None:
            major, minor = (version_tuple(stable_abi) + (0,))[:2]
            return f"torch-stable-abi{major}{minor}-{backend_tag}-{self.cpu_arch}-linux"
        major, minor = self.major_minor
        abi = "cxx11" if self.cxx11_abi else "cxx98"
        return f"torch{major}{minor}-{abi}-{backend_tag}-{self.cpu_arch}-linux"

    @property
    def cuda_tag(self) -> str | None:
        if self.cuda_version is None:
            return None
        major, minor = (self.cuda_version.split(".") + ["0"])[:2]
        return f"cu{major}{minor}"


def _torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise BuildError("building kernels needs torch in this Python environment "
                         "(pip install torch, then run kernel-wheels build again)")
    return Path(next(iter(spec.submodule_search_locations)))


def _version_module(root: Path) -> dict[str, object]:
    """The literal assignments of ``torch/version.py`` (never executed)."""
    try:
        return _version_module_at(root / "version.py")
    except (OSError, SyntaxError) as exc:
        raise BuildError(f"cannot read torch's version from {root / 'version.py'}: {exc}") from None


def _version_module_at(path: Path) -> dict[str, object]:
    """The literal assignments of a version module (never executed)."""
    values: dict[str, object] = {}
    tree = ast.parse(path.read_text("utf-8"))
    for node in tree.body:
        target: ast.expr
        value: ast.expr | None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and value is not None:
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return values


def _uses_cxx11_abi(library_dir: Path) -> bool:
    """torch's C++ ABI, read from libc10.so's exported names (``std::__cxx11::`` appears
    only with the new ABI) rather than from ``torch._C`` (which needs an import)."""
    from ..elf.reader import ElfError, dynamic_symbols_mention

    try:
        return dynamic_symbols_mention(library_dir / "libc10.so", b"__cxx11")
    except ElfError as exc:
        raise BuildError(f"cannot read torch's C++ ABI from {library_dir / 'libc10.so'}: {exc}") from None


def host_arch() -> str:
    """This machine's architecture, named as variant names name it."""
    machine = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)


def detect_torch() -> TorchEnv:
    if platform.system() != "Linux":
        raise BuildError("kernel-wheels build compiles Linux variants only")
    return torch_at(_torch_root(), host_arch())


def torch_at(root: Path, cpu_arch: str) -> TorchEnv:
    """The torch package folder ``root`` (the running torch's, or one unpacked from a
    wheel for another machine), read without importing it."""
    values = _version_module(root)
    version = values.get("__version__")
    match = re.match(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    if not isinstance(version, str) or match is None:
        raise BuildError(f"cannot read torch's version from {root / 'version.py'}")
    library_dir = root / "lib"
    if not (library_dir / "libc10.so").is_file():
        raise BuildError(f"torch at {root} has no lib/libc10.so: is it a complete torch install?")
    cuda = values.get("cuda")
    return TorchEnv(
        torch_version=version, major_minor=(int(match[1]), int(match[2])),
        cxx11_abi=_uses_cxx11_abi(library_dir),
        cuda_version=cuda if isinstance(cuda, str) else None, root=root,
        include_dirs=(root / "include", root / "include" / "torch" / "csrc" / "api" / "include"),
        library_dirs=(library_dir,), python_include=Path(sysconfig.get_paths()["include"]),
        cpu_arch=cpu_arch)


# --- tvm-ffi -------------------------------------------------------------------------


@dataclass(frozen=True)
class TvmFfiEnv:
    """The apache-tvm-ffi package of this environment, which tvm-ffi kernels compile and
    link against (kernel-builder finds it the same way: ``python -m tvm_ffi.config``)."""

    version: str  # "0.1.15.post2"
    root: Path  # the tvm_ffi package folder
    cpu_arch: str

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        return (self.root / "include",)

    @property
    def library_dir(self) -> Path:
        return self.root / "lib"

    def variant_name(self, backend_tag: str) -> str:
        """kernel-builder's ``tvm-ffi<major><minor>-<backend>-<arch>-linux``."""
        major, minor = (re.findall(r"\d+", self.version) + ["0", "0"])[:2]
        return f"tvm-ffi{major}{minor}-{backend_tag}-{self.cpu_arch}-linux"


def detect_tvm_ffi() -> TvmFfiEnv | None:
    """apache-tvm-ffi in this environment (found, never imported), or None."""
    from importlib import metadata

    spec = importlib.util.find_spec("tvm_ffi")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    try:
        version = metadata.version("apache-tvm-ffi")
    except metadata.PackageNotFoundError:
        try:
            version = str(_version_module_at(root / "_version.py").get("__version__", ""))
        except (OSError, SyntaxError):
            version = ""
    if not version or not (root / "include" / "tvm" / "ffi").is_dir() or not (
            root / "lib" / "libtvm_ffi.so").is_file():
        return None
    return TvmFfiEnv(version, root, host_arch())


def cxx_compiler() -> str:
    """``$CXX`` or ``g++``: what kernel-builder's CMake would pick on this machine."""
    compiler = os.environ.get("CXX", "g++")
    if shutil.which(compiler) is None:
        raise BuildError(f"no C++ compiler '{compiler}' found: install g++ (or set CXX)")
    return compiler


# --- CUDA ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaToolkit:
    nvcc: Path
    version: str  # "13.0"
    #: compute capabilities nvcc can target, "7.5", "12.1" (from --list-gpu-arch)
    supported_archs: tuple[str, ...]

    @property
    def root(self) -> Path:
        return self.nvcc.parent.parent

    @property
    def include_dir(self) -> Path:
        return self.root / "include"

    @property
    def tag(self) -> str:
        """``cu130``: the CUDA part of a variant name built with this toolkit."""
        major, minor = (self.version.split(".") + ["0"])[:2]
        return f"cu{major}{minor}"

    @property
    def library_dirs(self) -> tuple[Path, ...]:
        candidates = [self.root / "lib64", self.root / "lib",
                      *sorted(self.root.glob("targets/*-linux/lib"))]
        return tuple(d for d in candidates if (d / "libcudart.so").exists())

    def default_archs(self) -> tuple[str, ...]:
        """The capabilities kernel-builder compiles for with this CUDA version, without
        those this nvcc cannot target."""
        for entry in data.load("build_cuda")["default_archs"]:
            if version_tuple(self.version) >= version_tuple(entry["min_cuda"]):
                archs = tuple(entry["archs"])
                break
        supported = set(self.supported_archs)
        return tuple(a for a in archs if a.removesuffix("+PTX") in supported)


def _nvcc_archs(nvcc: Path) -> tuple[str, ...]:
    out = subprocess.run([str(nvcc), "--list-gpu-arch"], capture_output=True, text=True,
                         env=tool_environment()).stdout
    names = (parse_code_name(word) for word in re.findall(r"compute_\w+", out))
    return tuple(code.capability for code in names if code is not None and not code.suffix)


@functools.cache
def find_cuda_toolkit() -> CudaToolkit | None:
    """nvcc from CUDA_HOME, PATH, or /usr/local/cuda; None when there is none."""
    candidates = []
    if home := os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        candidates.append(Path(home) / "bin" / "nvcc")
    if found := shutil.which("nvcc"):
        candidates.append(Path(found))
    candidates.append(Path("/usr/local/cuda/bin/nvcc"))
    for nvcc in candidates:
        nvcc = nvcc.resolve()  # a symlink on PATH: the toolkit lives beside its target
        # A wrapper script on PATH is skipped: the toolkit is the folder with the headers.
        if nvcc.is_file() and (nvcc.parent.parent / "include" / "cuda_runtime_api.h").is_file():
            out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True,
                                 env=tool_environment()).stdout
            version = re.search(r"release (\d+\.\d+)", out)
            if version:
                return CudaToolkit(nvcc, version[1], _nvcc_archs(nvcc))
    return None


def math_library_include_dirs(toolkit: CudaToolkit, env: TorchEnv) -> tuple[Path, ...]:
    """Include folders for the CUDA math libraries (cuBLAS, cuSPARSE, cuSOLVER...) that
    torch's CUDA headers include but a toolkit may lack: the ``nvidia-*`` wheels that
    torch's CUDA builds install beside it (``nvidia/cu13/include`` or
    ``nvidia/<library>/include``). They go after the toolkit's own folder, so the
    toolkit's CUDA runtime headers always win."""
    headers = data.load("build_cuda")["math_library_headers"]
    missing = [h for h in headers if not (toolkit.include_dir / h).is_file()]
    if not missing:
        return ()
    found: list[Path] = []
    nvidia = env.site_packages / "nvidia"
    for folder in sorted(nvidia.glob("*/include")) if nvidia.is_dir() else []:
        if any((folder / h).is_file() for h in missing) and folder not in found:
            found.append(folder)
    return tuple(found)
