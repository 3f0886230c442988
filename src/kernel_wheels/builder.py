"""``kernel-wheels build``: compile a kernel-builder source tree for the running torch
and write the Hub layout (``OUT/build/<variant>/``, flat form plus the compatibility
sub-package, ``metadata.json`` with digests).

The compilers are driven directly (paths from ``torch.utils.cpp_extension``) rather
than through ``cpp_extension.BuildExtension``, because that links libtorch_python and
pybind11 glue and forces the 3.10 limited API; Hub kernels need none of those.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .buildtoml import DEFAULT_CUDA_CAPABILITIES, BuildConfig, KernelComponent, read_build_toml
from .digest import digest_folder
from .errors import BuildError
from .torchenv import CudaToolkit, TorchEnv, detect_torch, find_cuda_toolkit

# Python 3.9's limited API: the oldest the Hub kernels promise (cp39-abi3).
PY_LIMITED_API = "0x03090000"
COMPILED_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".cu"}

Log = Callable[[str], None]


@dataclass(frozen=True)
class BuiltVariant:
    backend: str
    variant: str
    path: Path
    extension_name: str
    seconds: float


def source_hash(config: BuildConfig) -> str:
    """7 hex digits identifying the source tree: the ops namespace differs per source."""
    digest = hashlib.sha256()
    for path in config.source_files():
        digest.update(path.relative_to(config.root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:7]


def _support_dir() -> Path:
    return Path(str(resources.files("kernel_wheels").joinpath("build_support")))


def _cuda_gencode(capabilities: tuple[str, ...]) -> list[str]:
    flags = []
    for cap in capabilities or DEFAULT_CUDA_CAPABILITIES:
        number = cap.removesuffix("+PTX").replace(".", "")
        code = f"[sm_{number},compute_{number}]" if cap.endswith("+PTX") else f"sm_{number}"
        flags.append(f"-gencode=arch=compute_{number},code={code}")
    return flags


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-25:])
        raise BuildError(f"{what} failed (exit {proc.returncode}):\n{tail}")


class _BackendBuild:
    """Compile and link one backend's extension module."""

    def __init__(self, config: BuildConfig, env: TorchEnv, backend: str,
                 cuda: CudaToolkit | None, ext_name: str, workdir: Path) -> None:
        self.config, self.env, self.backend, self.cuda = config, env, backend, cuda
        self.ext_name, self.workdir = ext_name, workdir

    def _common_flags(self, component: KernelComponent | None) -> list[str]:
        root = self.config.root
        flags = [
            f"-DTORCH_EXTENSION_NAME={self.ext_name}",
            f"-D{self.backend.upper()}_KERNEL",
            f"-DPy_LIMITED_API={PY_LIMITED_API}",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(self.env.cxx11_abi)}",
            # First on the path: registration.h and the sys/single_threaded.h shim.
            f"-I{_support_dir()}",
            f"-I{root / 'torch-ext'}",
            f"-I{root}",
        ]
        if component is not None:
            flags += [f"-I{root / inc}" for inc in component.include]
        flags += [f"-I{d}" for d in self.env.include_dirs]
        if self.cuda is not None:
            flags.append(f"-I{self.cuda.include_dir}")
        flags.append(f"-I{self.env.python_include}")
        return flags

    def _std(self) -> str:
        # torch 2.10 and later headers need C++20; older ones build with C++17.
        return "-std=c++20" if self.env.major_minor >= (2, 10) else "-std=c++17"

    def compile_command(self, src: Path, obj: Path, component: KernelComponent | None) -> list[str]:
        common = self._common_flags(component)
        if src.suffix == ".cu":
            assert self.cuda is not None and component is not None
            return [
                str(self.cuda.nvcc), self._std(), "-O3", "-c", str(src), "-o", str(obj),
                "-Xcompiler=-fPIC,-fvisibility=hidden,-g0", "-Wno-deprecated-gpu-targets",
                *_cuda_gencode(component.cuda_capabilities), *common, *component.cuda_flags,
            ]
        extra = component.cxx_flags if component is not None else ()
        return [
            os.environ.get("CXX", "g++"), self._std(), "-O3", "-fPIC", "-g0",
            "-fvisibility=hidden", "-c", str(src), "-o", str(obj), *common, *extra,
        ]

    def link_command(self, objects: list[Path], output: Path) -> list[str]:
        libs = [f"-L{d}" for d in self.env.library_dirs] + ["-lc10", "-ltorch", "-ltorch_cpu"]
        if self.backend == "cuda":
            assert self.cuda is not None
            if not self.cuda.library_dirs:
                raise BuildError(f"no libcudart.so next to {self.cuda.nvcc}")
            libs += ["-lc10_cuda", "-ltorch_cuda", *(f"-L{d}" for d in self.cuda.library_dirs),
                     "-lcudart"]
        # No -rpath: the libraries come from the torch already loaded in the process.
        # --as-needed drops libraries nothing references (libtorch_python never enters).
        return [
            os.environ.get("CXX", "g++"), "-shared", "-o", str(output), *map(str, objects),
            "-Wl,--as-needed", "-Wl,-O1", "-Wl,--strip-debug", *libs,
        ]

    def jobs(self) -> list[tuple[Path, KernelComponent | None]]:
        root = self.config.root
        units: list[tuple[Path, KernelComponent | None]] = [
            (root / s, None) for s in self.config.torch_src
        ]
        for component in self.config.components(self.backend):
            units += [(root / s, component) for s in component.src]
        return [(src, comp) for src, comp in units if src.suffix in COMPILED_SUFFIXES]

    def run(self, max_workers: int) -> Path:
        units = self.jobs()
        objects = [self.workdir / f"{i:03d}_{src.name}.o" for i, (src, _) in enumerate(units)]
        commands = [self.compile_command(src, obj, comp)
                    for (src, comp), obj in zip(units, objects, strict=True)]
        with ThreadPoolExecutor(max_workers=max_workers) as pool:
            futures = [pool.submit(_run, cmd, f"compiling {src.relative_to(self.config.root)}")
                       for cmd, (src, _) in zip(commands, units, strict=True)]
            for future in futures:
                future.result()
        output = self.workdir / f"{self.ext_name}.abi3.so"
        _run(self.link_command(objects, output), f"linking {output.name}")
        return output


def _ops_py(ext_name: str) -> str:
    return (
        "import torch\n\n"
        f"from . import {ext_name}\n\n"
        f"ops = torch.ops.{ext_name}\n\n\n"
        "def add_op_namespace_prefix(op_name: str) -> str:\n"
        '    """Prefix an op name with this build\'s unique ops namespace."""\n'
        f'    return f"{ext_name}::{{op_name}}"\n'
    )


COMPAT_INIT = '''\
# Compatibility sub-package of a flat kernel build: loaders that expect the legacy
# layout (build/<variant>/<module>/__init__.py) import this, and get the flat package
# one folder up, loaded as a package so that its relative imports work.
import importlib.util
import sys
from pathlib import Path

_flat = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    __name__, _flat / "__init__.py", submodule_search_locations=[str(_flat)]
)
_module = importlib.util.module_from_spec(_spec)
sys.modules[__name__] = _module
_spec.loader.exec_module(_module)
'''


def write_variant(config: BuildConfig, variant_dir: Path, ext_name: str,
                  extension: Path | None, backend: str, archs: list[str] | None) -> None:
    """Write one variant folder (flat layout) atomically: build beside, then rename."""
    variant_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{variant_dir.name}.", dir=variant_dir.parent))
    try:
        package = config.root / "torch-ext" / config.module_name
        if not (package / "__init__.py").is_file():
            raise BuildError(f"{package}/__init__.py is missing: the kernel has no Python package")
        shutil.copytree(package, staging, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (staging / "_ops.py").write_text(_ops_py(ext_name))
        if extension is not None:
            shutil.copy2(extension, staging / extension.name)
        compat = staging / config.module_name
        compat.mkdir()
        (compat / "__init__.py").write_text(COMPAT_INIT)
        metadata: dict[str, object] = {"name": config.name, "id": ext_name}
        if config.version is not None:
            metadata["version"] = config.version
        if config.license:
            metadata["license"] = config.license
        if config.upstream:
            metadata["upstream"] = config.upstream
        metadata["python-depends"] = list(config.python_depends)
        backend_info: dict[str, object] = {"type": backend}
        if archs:
            backend_info["archs"] = archs
        metadata["backend"] = backend_info
        metadata["digest"] = {"algorithm": "sha256", "files": digest_folder(staging)}
        (staging / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
        for path in staging.rglob("*"):
            path.chmod(0o755 if path.is_dir() or path.suffix == ".so" else 0o644)
        staging.chmod(0o755)
        if variant_dir.exists():
            shutil.rmtree(variant_dir)
        staging.rename(variant_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def buildable_backends(config: BuildConfig, env: TorchEnv,
                       cuda: CudaToolkit | None) -> tuple[list[str], dict[str, str]]:
    """The backends this environment can build, and why the others are skipped."""
    chosen, skipped = [], {}
    for backend in config.backends:
        if backend == "cpu":
            chosen.append(backend)
        elif backend == "cuda":
            if env.cuda_version is None:
                skipped[backend] = f"torch {env.torch_version} is not a CUDA build"
            elif cuda is None:
                skipped[backend] = "no nvcc found (set CUDA_HOME or put nvcc on PATH)"
            else:
                chosen.append(backend)
        else:
            skipped[backend] = f"building {backend} kernels is not supported on this machine"
    return chosen, skipped


def build_kernel(source_dir: Path, out_dir: Path, *, backends: list[str] | None = None,
                 jobs: int | None = None, log: Log = lambda _: None) -> list[BuiltVariant]:
    """Build every buildable (or every requested) backend of ``source_dir`` into
    ``out_dir/build/<variant>/``."""
    config = read_build_toml(source_dir.resolve())
    if config.noarch:
        raise BuildError("build.toml has [torch-noarch]: pure-Python kernels need no build")
    env = detect_torch()
    cuda = find_cuda_toolkit() if env.cuda_version else None
    possible, skipped = buildable_backends(config, env, cuda)
    if backends:
        unknown = [b for b in backends if b not in config.backends]
        if unknown:
            raise BuildError(f"{config.name} has no backend {', '.join(unknown)} "
                             f"(build.toml lists {', '.join(config.backends)})")
        for backend in backends:
            if backend in skipped:
                raise BuildError(f"cannot build {backend}: {skipped[backend]}")
        possible = [b for b in possible if b in backends]
    else:
        for backend, why in skipped.items():
            log(f"skipping backend {backend}: {why}")
    if not possible:
        raise BuildError(f"nothing to build for {config.name} in this environment")
    if cuda and env.cuda_version and cuda.version.split(".")[0] != env.cuda_version.split(".")[0]:
        log(f"warning: nvcc is CUDA {cuda.version} but torch was built with CUDA {env.cuda_version}")

    digest = source_hash(config)
    results = []
    for backend in possible:
        started = time.monotonic()
        ext_name = f"_{config.module_name}_{backend}_{digest}"
        tag = env.cuda_tag if backend == "cuda" else backend
        assert tag is not None
        variant = env.variant_name(tag)
        log(f"building {variant} ({ext_name})")
        archs = None
        if backend == "cuda":
            caps = {c for k in config.components("cuda") for c in k.cuda_capabilities}
            archs = sorted(caps or DEFAULT_CUDA_CAPABILITIES)
        with tempfile.TemporaryDirectory(prefix="kernel-wheels-build-") as work:
            build = _BackendBuild(config, env, backend, cuda if backend == "cuda" else None,
                                  ext_name, Path(work))
            extension = build.run(jobs or os.cpu_count() or 1)
            target = out_dir / "build" / variant
            write_variant(config, target, ext_name, extension, backend, archs)
        seconds = time.monotonic() - started
        log(f"built {target} in {seconds:.1f} s")
        results.append(BuiltVariant(backend, variant, target, ext_name, seconds))
    return results
