"""``kernel-wheels build``: compile a kernel-builder source tree for the running torch
and write the Hub layout (``OUT/build/<variant>/``), the way kernel-builder builds it,
without Nix.

Read top to bottom: read and check ``build.toml`` and the sources -> decide, per
backend, what can be built here -> for each backend independently: resolve its
dependencies and CUDA capabilities, compile (in parallel, unchanged files from the
object cache, failing fast), link (newer libstdc++ parts statically), check the
extension, write the variant. A backend that fails is reported and the others still
build. The pieces live in :mod:`kernel_wheels.building`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import BuildError
from . import depends, object_cache
from .cache_paths import work_root
from .compile_env import BackendEnvironment
from .config import BuildConfig, read_build_toml, version_tuple
from .cross import cross_compiler, target_torch, tool_prefix
from .cuda_archs import plan_archs
from .extension_check import check_extension, imports_of
from .scheduler import compile_units, compiler_id, run_tool
from .source_checks import check_sources
from .symbol_versions import describe, link_within_policy
from .toolchain import (
    CudaToolkit,
    TorchEnv,
    TvmFfiEnv,
    cxx_compiler,
    detect_torch,
    detect_tvm_ffi,
    find_cuda_toolkit,
    host_arch,
    math_library_include_dirs,
)
from .variant import write_variant

Log = Callable[[str], None]
Status = Literal["built", "failed", "skipped"]

#: backends kernel-wheels compiles (the others are noarch-only here)
COMPILED_BACKENDS = ("cpu", "cuda")


@dataclass(frozen=True)
class BuildOptions:
    backends: tuple[str, ...] = ()  # empty: every backend build.toml lists
    jobs: int | None = None  # compilers at once; None: every core
    cuda_archs: tuple[str, ...] = ()  # narrow the CUDA capabilities (else TORCH_CUDA_ARCH_LIST)
    #: Keep the binaries within manylinux_2_28 (link newer libstdc++ parts statically,
    #: bind moved glibc functions to their old versions, fail on the rest). False builds
    #: for this machine's glibc only: convert with `to-wheel --manylinux-version auto`.
    manylinux: bool = True
    #: build for another machine (``aarch64`` on x86_64): cpu kernels, with a cross
    #: compiler and torch's wheel for that machine; None: this machine
    target_arch: str | None = None


@dataclass(frozen=True)
class BackendResult:
    backend: str
    status: Status
    variant: str | None = None
    path: Path | None = None
    extension_name: str | None = None
    seconds: float = 0.0
    message: str = ""  # why it failed or was skipped (compiler output on later lines)


#: What build_kernel returns for each built variant (the name scripts know).
BuiltVariant = BackendResult


@dataclass(frozen=True)
class BuildReport:
    kernel: str
    results: tuple[BackendResult, ...] = field(default_factory=tuple)

    @property
    def built(self) -> tuple[BackendResult, ...]:
        return tuple(r for r in self.results if r.status == "built")

    @property
    def failed(self) -> tuple[BackendResult, ...]:
        return tuple(r for r in self.results if r.status == "failed")

    def nothing_built(self) -> str:
        """The error when every backend was skipped, with the reasons."""
        by_reason: dict[str, list[str]] = {}
        for result in self.results:
            by_reason.setdefault(result.message, []).append(result.backend)
        reasons = "; ".join(f"{', '.join(b)}: {m}" for m, b in by_reason.items())
        return f"nothing to build for {self.kernel} in this environment ({reasons})"

    def raise_for_failures(self) -> None:
        """:class:`BuildError` when a backend failed (one backend's whole message when it
        was the only one tried; else each one's first line, then the compiler output), or
        when nothing was built."""
        if self.failed:
            if len(self.failed) == 1 and not self.built:
                raise BuildError(self.failed[0].message)
            raise BuildError("; ".join(f"{r.backend}: {r.message.splitlines()[0]}" for r in self.failed)
                             + "\n" + "\n".join(line for r in self.failed
                                                for line in r.message.splitlines()[1:]))
        if not self.built:
            raise BuildError(self.nothing_built())


def source_hash(config: BuildConfig) -> str:
    """7 hex digits identifying the source tree: the ops namespace differs per source."""
    digest = hashlib.sha256()
    for path in config.source_files():
        digest.update(path.relative_to(config.root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:7]


# --- what each backend is, here -------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    backend: str
    kind: Literal["compiled", "noarch"]
    stable_abi: str | None = None
    cuda: CudaToolkit | None = None


class _Environment:
    """The torch, apache-tvm-ffi, C++ compiler and CUDA toolkit a build uses, looked up
    once and only if needed: this machine's, or for a cross build (``target_arch``) the
    cross compiler and torch's wheel for the target."""

    def __init__(self, target_arch: str | None, log: Log) -> None:
        self.host = host_arch()
        self.arch = target_arch or self.host
        self.log = log
        self._torch: TorchEnv | None = None
        self._tvm_ffi: TvmFfiEnv | None = None

    @property
    def cross(self) -> bool:
        return self.arch != self.host

    @property
    def torch(self) -> TorchEnv:
        if self._torch is None:
            running = detect_torch()
            self._torch = target_torch(self.arch, running, self.log) if self.cross else running
        return self._torch

    @property
    def cxx(self) -> str:
        return cross_compiler(self.arch) if self.cross else cxx_compiler()

    @property
    def tools(self) -> str:
        """The prefix of the target's binutils ("" on this machine)."""
        return tool_prefix(self.arch, self.host)

    @property
    def tvm_ffi(self) -> TvmFfiEnv:
        if self._tvm_ffi is None:
            self._tvm_ffi = detect_tvm_ffi()
            if self._tvm_ffi is None:
                raise BuildError("building tvm-ffi kernels needs apache-tvm-ffi in this Python "
                                 "environment (pip install apache-tvm-ffi)")
        return self._tvm_ffi


def _why_no_cuda(config: BuildConfig, torch: TorchEnv | None) -> str | None:
    """None when nvcc (of torch's CUDA major version, for a torch kernel) can build."""
    toolkit = find_cuda_toolkit()
    if torch is not None and torch.cuda_version is None:
        return f"torch {torch.torch_version} is not a CUDA build"
    if toolkit is None:
        return "no nvcc found (set CUDA_HOME or put nvcc on PATH)"
    if torch is not None and torch.cuda_version is not None and (
            toolkit.version.split(".")[0] != torch.cuda_version.split(".")[0]):
        return (f"nvcc is CUDA {toolkit.version} but torch was built with CUDA "
                f"{torch.cuda_version}: point CUDA_HOME at a CUDA "
                f"{torch.cuda_version.split('.')[0]} toolkit")
    bounds = config.backend_general("cuda")
    low = bounds.minver or "11.8"
    high = bounds.maxver
    if version_tuple(toolkit.version) < version_tuple(low) or (
            high is not None and version_tuple(toolkit.version) > version_tuple(high)):
        return (f"[general.cuda] allows CUDA {low} to {high or 'any newer'}; this nvcc is "
                f"CUDA {toolkit.version}")
    return None


def _why_not_compiled(config: BuildConfig, backend: str, env: _Environment) -> str | None:
    """None when this machine can compile ``backend``; else the reason."""
    if backend not in COMPILED_BACKENDS:
        return (f"compiling {backend} kernels needs the {backend} toolchain, which kernel-wheels "
                "build does not drive (it compiles cpu and cuda kernels)")
    if env.cross and (backend != "cpu" or config.framework.kind == "tvm-ffi"):
        return (f"a build for {env.arch} on this {env.host} machine (--target-arch) compiles cpu "
                "kernels against torch only")
    if config.framework.kind == "tvm-ffi":
        # a tvm-ffi kernel needs no torch: apache-tvm-ffi, and nvcc for cuda
        if detect_tvm_ffi() is None:
            return "apache-tvm-ffi is not installed in this Python environment"
        return _why_no_cuda(config, None) if backend == "cuda" else None
    torch = env.torch
    if backend == "cuda" and (why := _why_no_cuda(config, torch)) is not None:
        return why
    stable = config.framework.stable_abi.get(backend)
    if stable is not None and torch.major_minor < version_tuple(stable)[:2]:
        return (f"[torch] stable-abi targets torch {stable} for {backend}, newer than this torch "
                f"{torch.torch_version}")
    return None


def _check_torch_bounds(config: BuildConfig, torch: TorchEnv) -> None:
    framework = config.framework
    running = torch.major_minor
    if framework.minver and running < version_tuple(framework.minver)[:2]:
        raise BuildError(f"[torch] minver is {framework.minver}: this torch "
                         f"{torch.torch_version} is too old for {config.name}")
    if framework.maxver and running > (version_tuple(framework.maxver) + (0,))[:2]:
        raise BuildError(f"[torch] maxver is {framework.maxver}: this torch "
                         f"{torch.torch_version} is too new for {config.name}")


def _plans(config: BuildConfig, requested: tuple[str, ...], env: _Environment,
           log: Log) -> list[_Plan | BackendResult]:
    explicit = bool(requested)
    backends = requested or config.backends
    unknown = [b for b in backends if b not in config.backends]
    if unknown:
        raise BuildError(f"{config.name} has no backend {', '.join(unknown)} "
                         f"(build.toml lists {', '.join(config.backends)})")
    plans: list[_Plan | BackendResult] = []
    for backend in backends:
        if config.noarch or not config.components(backend):
            # kernel-builder: a backend without compiled components is a noarch package
            plans.append(_Plan(backend, "noarch"))
            continue
        why = _why_not_compiled(config, backend, env)
        if why is not None:
            status: Status = "failed" if explicit else "skipped"
            if explicit:
                why = f"cannot build {backend}: {why}"
            else:
                log(f"skipping backend {backend}: {why}")
            plans.append(BackendResult(backend, status, message=why))
            continue
        plans.append(_Plan(backend, "compiled", config.framework.stable_abi.get(backend),
                           find_cuda_toolkit() if backend == "cuda" else None))
    if config.framework.kind == "torch" and any(isinstance(p, _Plan) and p.kind == "compiled"
                                                for p in plans):
        _check_torch_bounds(config, env.torch)
    return plans


# --- one compiled backend --------------------------------------------------------------


def _environment(config: BuildConfig, plan: _Plan, machine: _Environment, torch: TorchEnv | None,
                 tvm_ffi: TvmFfiEnv | None, ext_name: str, options: BuildOptions, jobs: int,
                 log: Log) -> BackendEnvironment:
    components = config.components(plan.backend)
    where: dict[str, str] = {}
    for component in components:
        for dependency in component.depends:
            where.setdefault(dependency, component.where)
    resolved = depends.resolve(tuple(where), plan.backend, where, log)
    dependency_includes = tuple(d for r in resolved for d in r.include_dirs)
    cuda = plan.cuda
    component_archs: list[tuple[str, tuple[str, ...]]] = []
    threads = 1
    if cuda is not None:
        archs = plan_archs(cuda.default_archs(), cuda.supported_archs, options.cuda_archs)
        component_archs.append(("", tuple(archs.default)))
        for component in components:
            chosen = archs.for_component(component.where, component.cuda_capabilities, cuda.version)
            component_archs.append((component.id, tuple(chosen)))
            threads = max(threads, len(chosen))
        threads = max(1, min(threads, jobs))
    return BackendEnvironment(
        config=config, backend=plan.backend, torch=torch, cxx=machine.cxx, ext_name=ext_name,
        cuda=cuda, stable_abi=plan.stable_abi, dependency_includes=dependency_includes,
        math_includes=math_library_include_dirs(cuda, torch) if cuda and torch else (),
        component_archs=tuple(component_archs), nvcc_threads=threads,
        host_compiler=os.environ.get("CXX"), tvm_ffi=tvm_ffi)


def _drop_too_new_components(config: BuildConfig, cuda: CudaToolkit, log: Log) -> BuildConfig:
    """kernel-builder leaves out a CUDA component whose cuda-minver this toolkit misses."""
    kept = []
    for component in config.kernels:
        if (component.backend == "cuda" and component.cuda_minver
                and version_tuple(cuda.version) < version_tuple(component.cuda_minver)):
            log(f"cuda: {component.where} needs CUDA {component.cuda_minver}; left out with "
                f"CUDA {cuda.version}")
            continue
        kept.append(component)
    if len(kept) == len(config.kernels):
        return config
    from dataclasses import replace
    return replace(config, kernels=tuple(kept))


def _link_command(env: BackendEnvironment, objects: list[Path], output: Path,
                  extra: list[str]) -> list[str]:
    if env.torch is not None:
        libs = [f"-L{d}" for d in env.torch.library_dirs] + ["-lc10", "-ltorch", "-ltorch_cpu"]
        # Only PyInit_<name> is exported: also nothing of the libstdc++ parts linked in.
        exported = f"PyInit_{env.ext_name}"
    else:
        assert env.tvm_ffi is not None
        libs = [f"-L{env.tvm_ffi.library_dir}", "-ltvm_ffi"]
        exported = "__tvm_ffi_*"  # the functions TVM_FFI_DLL_EXPORT_TYPED_FUNC exports
    if env.cuda is not None:
        if not env.cuda.library_dirs:
            raise BuildError(f"no libcudart.so next to {env.cuda.nvcc}")
        if env.torch is not None:
            libs += ["-lc10_cuda", "-ltorch_cuda"]
        libs += [*(f"-L{d}" for d in env.cuda.library_dirs), "-lcudart"]
    exports = output.parent / "exports.map"
    exports.write_text(f"{{ global: {exported}; local: *; }};\n")
    # No -rpath: the libraries come from the torch already loaded in the process.
    # --as-needed drops libraries nothing references (libtorch_python never enters).
    return [env.cxx, "-shared", "-o", str(output), *map(str, objects), *extra,
            f"-Wl,--version-script={exports}", "-Wl,--as-needed", "-Wl,-O1", "-Wl,--strip-debug",
            *libs]


def _compile_backend(config: BuildConfig, plan: _Plan, machine: _Environment, out_dir: Path,
                     build_id: str, options: BuildOptions, jobs: int, work: Path,
                     log: Log) -> BackendResult:
    started = time.monotonic()
    backend = plan.backend
    if plan.cuda is not None:
        config = _drop_too_new_components(config, plan.cuda, log)
    ext_name = f"_{config.module_name}_{backend}_{build_id}"
    torch: TorchEnv | None = None
    tvm_ffi: TvmFfiEnv | None = None
    if config.framework.kind == "tvm-ffi":
        tvm_ffi = machine.tvm_ffi
        variant = tvm_ffi.variant_name(plan.cuda.tag if plan.cuda is not None else backend)
        library = work / f"{ext_name}.so"  # a plain shared library, loaded by tvm_ffi
        arch = tvm_ffi.cpu_arch
    else:
        torch = machine.torch
        tag = torch.cuda_tag if backend == "cuda" else backend
        assert tag is not None
        variant = torch.variant_name(tag, plan.stable_abi)
        library = work / f"{ext_name}.abi3.so"
        arch = torch.cpu_arch
    log(f"{backend}: building {variant} ({ext_name})")
    env = _environment(config, plan, machine, torch, tvm_ffi, ext_name, options, jobs, log)
    units = env.units()
    ids = {"cxx": compiler_id(env.cxx)}
    if env.cuda is not None:
        ids["cuda"] = compiler_id(str(env.cuda.nvcc)) + "\n" + ids["cxx"]
    objects = compile_units(units, work, jobs, ids, log, label=backend)
    output = library
    if options.manylinux:
        fixes = link_within_policy(
            lambda extra: run_tool(_link_command(env, objects, output, extra),
                                   f"linking {output.name}", work),
            lambda: imports_of(output), env.cxx, work, arch=arch, tools=machine.tools)
        for line in describe(fixes):
            log(f"  {backend}: {line}")
    else:
        run_tool(_link_command(env, objects, output, []), f"linking {output.name}", work)
        log(f"  {backend}: linked for this machine's glibc (--no-manylinux)")
    check_extension(output, ext_name, policy=options.manylinux, tvm_ffi=tvm_ffi is not None)
    archs = None
    if env.cuda is not None:
        archs = [a for cid, chosen in env.component_archs if cid for a in chosen]
    target = out_dir / "build" / variant
    write_variant(config, target, backend, ext_name, output, archs, build_id)
    seconds = time.monotonic() - started
    log(f"{backend}: built {target} in {seconds:.1f} s")
    return BackendResult(backend, "built", variant, target, ext_name, seconds)


def _noarch_backend(config: BuildConfig, backend: str, out_dir: Path, build_id: str,
                    log: Log) -> BackendResult:
    started = time.monotonic()
    variant = f"torch-{backend}"
    ext_name = f"_{config.module_name}_{backend}_{build_id}"
    archs = None
    if config.noarch and backend == "cuda":
        archs = list(config.framework.cuda_capabilities or []) or None
    elif config.noarch and backend == "rocm":
        archs = list(config.framework.rocm_archs or []) or None
    target = out_dir / "build" / variant
    write_variant(config, target, backend, ext_name, None, archs, build_id)
    seconds = time.monotonic() - started
    log(f"{backend}: built {target} (noarch) in {seconds:.1f} s")
    return BackendResult(backend, "built", variant, target, ext_name, seconds)


# --- the whole build -------------------------------------------------------------------


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a killed CI job, ``kill``) unwinds like Ctrl-C, so that every ``finally``
    runs: compilers stopped, work folder and half-written variants removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def build(source_dir: Path, out_dir: Path, options: BuildOptions = BuildOptions(),
          log: Log = lambda _: None) -> BuildReport:
    """Build every backend of ``source_dir`` (or those asked for) into
    ``out_dir/build/<variant>/``. Errors in the tree itself raise :class:`BuildError`;
    a backend that fails to compile is reported in the result and the others go on."""
    config = read_build_toml(source_dir.resolve())
    check_sources(config)
    build_id = source_hash(config)
    env = _Environment(options.target_arch, log)
    plans = _plans(config, options.backends, env, log)
    jobs = max(1, options.jobs or len(os.sched_getaffinity(0)))
    results: list[BackendResult] = []
    with _terminate_as_interrupt(), work_root() as root:
        for plan in plans:
            if isinstance(plan, BackendResult):
                results.append(plan)
                continue
            try:
                if plan.kind == "noarch":
                    results.append(_noarch_backend(config, plan.backend, out_dir, build_id, log))
                    continue
                with tempfile.TemporaryDirectory(prefix=f"{plan.backend}-", dir=root) as work:
                    results.append(_compile_backend(config, plan, env, out_dir, build_id,
                                                    options, jobs, Path(work), log))
            except BuildError as exc:
                log(f"{plan.backend}: failed: {exc.message.splitlines()[0]}")
                results.append(BackendResult(plan.backend, "failed", message=exc.message))
    object_cache.prune()
    return BuildReport(config.name, tuple(results))


def build_kernel(source_dir: Path, out_dir: Path, *, backends: list[str] | None = None,
                 jobs: int | None = None, log: Log = lambda _: None) -> list[BackendResult]:
    """:func:`build`, raising :class:`BuildError` if any backend failed; returns the
    built variants."""
    report = build(source_dir, out_dir, BuildOptions(tuple(backends or ()), jobs), log)
    if report.failed:
        raise BuildError(report.failed[0].message)
    if not report.built:
        raise BuildError(report.nothing_built())
    return list(report.built)


__all__ = ["BackendResult", "BuildOptions", "BuildReport", "BuiltVariant", "build", "build_kernel",
           "source_hash"]
