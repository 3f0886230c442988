"""The compiler command lines of one backend's extension: kernel-builder's compile
environment (what its generated CMake project and torch's CMake package give each
file), written out as plain ``g++``/``nvcc`` arguments.

For every file: Release optimisation (``-O3 -DNDEBUG``), position-independent code,
torch's C++ ABI define, the C++ standard kernel-builder sets (C++17 before torch 2.12,
C++20 from it; the same for nvcc, which torch 2.12's headers need),
``TORCH_EXTENSION_NAME``, the ``<BACKEND>_KERNEL`` macro (and ``USE_CUDA=1`` for CUDA),
``TORCH_TARGET_VERSION`` for stable-ABI builds, and ``registration.h`` from
``build_support``. CUDA files also get torch's nvcc flags (``--expt-relaxed-constexpr``,
``--expt-extended-lambda``, ``-DENABLE_FP8``) and one ``-gencode`` per capability.

Differences from kernel-builder, on purpose: symbols are hidden (``-fvisibility=hidden``;
only ``PyInit_*`` is exported), the Python limited API is 3.9 (the cp39-abi3 promise),
source paths are recorded relative to the kernel (``-ffile-prefix-map``), and the include
folders of all components of a backend (and the folders of their sources) are on the
path of every file of that backend, so the ``[torch]`` binding sources find the headers
a kernel keeps in its own folders.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .. import data
from .config import BuildConfig, KernelComponent, version_tuple
from .toolchain import CudaToolkit, TorchEnv, TvmFfiEnv

CXX_SUFFIXES = frozenset({".cc", ".cpp", ".cxx", ".c++"})
CUDA_SUFFIXES = frozenset({".cu"})


def support_dir() -> Path:
    return Path(str(resources.files("kernel_wheels").joinpath("build_support")))


def stable_abi_define(version: str) -> str:
    """torch's ``TORCH_TARGET_VERSION``: major in bits 56-63, minor in bits 48-55."""
    major, minor = (version_tuple(version) + (0,))[:2]
    return f"-DTORCH_TARGET_VERSION=0x{(major << 56) | (minor << 48):016x}"


@dataclass(frozen=True)
class CompileUnit:
    """One source file and the command that compiles it into ``object_name``."""

    source: Path
    relpath: str
    language: str  # "cxx" | "cuda"
    arguments: tuple[str, ...]  # without the output and dependency-file arguments
    object_name: str

    def command(self, output: Path, depfile: Path) -> list[str]:
        return [*self.arguments, "-c", str(self.source), "-o", str(output),
                "-MD", "-MF", str(depfile)]

    def shell(self) -> str:
        return shlex.join(self.arguments)


@dataclass(frozen=True)
class BackendEnvironment:
    """Everything a backend's compile commands depend on."""

    config: BuildConfig
    backend: str
    #: the torch a torch kernel compiles against; None for a tvm-ffi kernel
    torch: TorchEnv | None
    cxx: str
    ext_name: str
    cuda: CudaToolkit | None = None
    stable_abi: str | None = None
    dependency_includes: tuple[Path, ...] = ()
    math_includes: tuple[Path, ...] = ()
    #: component id -> capabilities ("8.0", "9.0+PTX"), CUDA only
    component_archs: tuple[tuple[str, tuple[str, ...]], ...] = ()
    nvcc_threads: int = 1
    #: nvcc's host compiler when $CXX names one (else nvcc's default)
    host_compiler: str | None = None
    #: the apache-tvm-ffi a tvm-ffi kernel compiles against; None for a torch kernel
    tvm_ffi: TvmFfiEnv | None = None

    @property
    def cxx_standard(self) -> str:
        # tvm-ffi's CMake package asks for C++17 (kernel-builder sets no other)
        if self.torch is None or self.torch.major_minor < (2, 12):
            return "-std=gnu++17"
        return "-std=gnu++20"

    def defines(self) -> list[str]:
        if self.torch is None:  # tvm-ffi: kernel-builder's tvm-ffi-extension.cmake
            return [f"-DTVM_FFI_EXTENSION_NAME={self.ext_name}", f"-D{self.backend.upper()}_KERNEL"]
        limits = data.load("build_toolchain")
        defines = [f"-DTORCH_EXTENSION_NAME={self.ext_name}", f"-D{self.backend.upper()}_KERNEL",
                   f"-DPy_LIMITED_API={limits['py_limited_api']}",
                   f"-D_GLIBCXX_USE_CXX11_ABI={int(self.torch.cxx11_abi)}"]
        if self.backend == "cuda":
            defines.append("-DUSE_CUDA=1")
        if self.stable_abi is not None:
            defines.append(stable_abi_define(self.stable_abi))
        return defines

    def backend_include_dirs(self) -> list[Path]:
        """Folders every file of this backend sees after its own component's: the
        framework's ``include``, ``csrc`` (kernel-builder adds it to every target), and
        each component's ``include`` and source folders."""
        root = self.config.root
        dirs = [root / d for d in self.config.framework.include]
        if (root / "csrc").is_dir():
            dirs.append(root / "csrc")
        for component in self.config.components(self.backend):
            dirs += [root / d for d in component.include]
            dirs += [(root / s).parent for s in component.src]
        return list(dict.fromkeys(d for d in dirs if d.is_dir()))

    def system_include_dirs(self) -> list[Path]:
        dirs = [*self.dependency_includes]
        if self.torch is not None:
            dirs += self.torch.include_dirs
        if self.tvm_ffi is not None:
            dirs += self.tvm_ffi.include_dirs
        if self.cuda is not None:
            dirs += [self.cuda.include_dir, *self.math_includes]
        if self.torch is not None:
            dirs.append(self.torch.python_include)
        return dirs

    def include_flags(self, component: KernelComponent | None) -> list[str]:
        root = self.config.root
        own = [root / d for d in component.include] if component is not None else []
        user = list(dict.fromkeys([*own, *self.backend_include_dirs()]))
        # build_support first: registration.h, and the sys/single_threaded.h shim that
        # must shadow glibc's (see the shim's comment).
        flags = [f"-I{support_dir()}", *(f"-I{d}" for d in user)]
        if self.cuda is not None:
            # Before any -isystem folder: the toolkit's runtime headers win over the
            # copies in nvidia-* wheels.
            flags.append(f"-I{self.cuda.include_dir}")
        for folder in self.system_include_dirs():
            flags += ["-isystem", str(folder)]  # two arguments: nvcc knows no -isystem<dir>
        return flags

    def archs_of(self, component: KernelComponent | None) -> tuple[str, ...]:
        """A component's capabilities; the framework's own .cu files get the defaults."""
        return dict(self.component_archs).get(component.id if component else "", ())

    def cxx_arguments(self, flags: tuple[str, ...]) -> list[str]:
        return [self.cxx, self.cxx_standard, "-O3", "-DNDEBUG", "-fPIC", "-fvisibility=hidden",
                "-fno-gnu-unique", f"-ffile-prefix-map={self.config.root}=.", *flags]

    def cuda_arguments(self, component: KernelComponent | None) -> list[str]:
        assert self.cuda is not None
        from .cuda_archs import gencode_flags

        dropped = set(data.load("build_cuda")["nvcc_flags_from_torch_dropped"])
        # torch's CMake package adds these (and -DENABLE_FP8) to torch kernels only
        torch_flags = [f for f in ("--expt-relaxed-constexpr", "--expt-extended-lambda", "-DENABLE_FP8")
                       if f not in dropped] if self.torch is not None else []
        cuda_flags = list(component.cuda_flags) if component is not None else []
        if version_tuple(self.cuda.version) < (12, 8):
            # kernel-builder drops this flag for toolkits that do not know it
            cuda_flags = [f for f in cuda_flags if not f.startswith("-static-global-template-stub")]
        return [str(self.cuda.nvcc), self.cxx_standard.replace("gnu++", "c++"), "-O3", "-DNDEBUG",
                *torch_flags,
                "-Xcompiler=-fPIC,-fvisibility=hidden",
                f"-Xcompiler=-ffile-prefix-map={self.config.root}=.",
                "-Wno-deprecated-gpu-targets", f"--threads={self.nvcc_threads}",
                *gencode_flags(self.archs_of(component)), *cuda_flags,
                *(["-ccbin", self.host_compiler] if self.host_compiler else [])]

    def units(self) -> list[CompileUnit]:
        """The backend's compiled files: the framework's sources, then each component's."""
        root = self.config.root
        entries: list[tuple[str, KernelComponent | None]] = [
            (s, None) for s in self.config.framework.src]
        for kernel in self.config.components(self.backend):
            entries += [(s, kernel) for s in kernel.src]
        units = []
        for index, (relpath, component) in enumerate(entries):
            source = root / relpath
            suffix = source.suffix.lower()
            if suffix in CUDA_SUFFIXES and self.cuda is not None:
                language = "cuda"
                args = [*self.cuda_arguments(component), *self.defines(),
                        *self.include_flags(component)]
            elif suffix in CXX_SUFFIXES:
                language = "cxx"
                # [torch] cxx-flags reach the binding files, a component's its own files
                extra = component.cxx_flags if component is not None else self.config.framework.cxx_flags
                args = [*self.cxx_arguments(()), *self.defines(), *self.include_flags(component),
                        *extra]
            else:
                continue  # headers and other listed files are dependencies, not units
            units.append(CompileUnit(source, relpath, language, tuple(args),
                                     f"{index:03d}_{source.name}.o"))
        return units
