"""The torch (and CUDA toolkit) of the running environment, as the builder needs it.

Only ``kernel-wheels build`` imports torch; converting and checking never do.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError


@dataclass(frozen=True)
class CudaToolkit:
    nvcc: Path
    version: str  # "13.0"

    @property
    def include_dir(self) -> Path:
        return self.nvcc.parent.parent / "include"

    @property
    def library_dirs(self) -> tuple[Path, ...]:
        root = self.nvcc.parent.parent
        candidates = [root / "lib64", root / "lib", *sorted(root.glob("targets/*-linux/lib"))]
        return tuple(d for d in candidates if (d / "libcudart.so").exists())


@dataclass(frozen=True)
class TorchEnv:
    torch_version: str
    major_minor: tuple[int, int]
    cxx11_abi: bool
    cuda_version: str | None  # torch.version.cuda, None for CPU builds
    include_dirs: tuple[Path, ...]
    library_dirs: tuple[Path, ...]
    python_include: Path
    cpu_arch: str

    def variant_name(self, backend_tag: str) -> str:
        major, minor = self.major_minor
        abi = "cxx11" if self.cxx11_abi else "cxx98"
        return f"torch{major}{minor}-{abi}-{backend_tag}-{self.cpu_arch}-linux"

    @property
    def cuda_tag(self) -> str | None:
        if self.cuda_version is None:
            return None
        major, minor = self.cuda_version.split(".")[:2]
        return f"cu{major}{minor}"


def detect_torch() -> TorchEnv:
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        raise BuildError(
            "building kernels needs torch in this Python environment "
            "(pip install torch, then run kernel-wheels build again)"
        ) from None
    if platform.system() != "Linux":
        raise BuildError("kernel-wheels build compiles Linux variants only")
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    assert match is not None, torch.__version__
    machine = platform.machine()
    return TorchEnv(
        torch_version=torch.__version__,
        major_minor=(int(match[1]), int(match[2])),
        cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        cuda_version=torch.version.cuda,
        include_dirs=tuple(Path(p) for p in cpp_extension.include_paths()),
        library_dirs=tuple(Path(p) for p in cpp_extension.library_paths()),
        python_include=Path(sysconfig.get_paths()["include"]),
        cpu_arch={"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine),
    )


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
            out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout
            version = re.search(r"release (\d+\.\d+)", out)
            if version:
                return CudaToolkit(nvcc, version[1])
    return None
