"""The facts of a Python environment that decide which kernel build it can use.

:func:`read_environment` runs the probe (:mod:`.probe`) *in the target interpreter*
(which need not have kernel-wheels installed): Python version and supported wheel tags,
OS, CPU architecture, and torch's version, CUDA / ROCm / XPU versions, C++ ABI, MPS and
GPU; :func:`running_environment` asks the same probe in this process.
:func:`target_key` turns those facts into the environment's target key with the same
rules as the Hub's loader (``kernels/backends.py``: CUDA, then ROCm, then Metal, then
XPU, else CPU). The import guard inside arch wheels carries its own copy of this rule.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import packaging
from packaging.version import InvalidVersion, Version

from ..cache import cache_dir
from ..errors import EnvironmentProbeError, UsageError
from ..index.targets import Target, parse_target_key
from ..kernel.gpu_archs import parse_amd_target
from ..reading import parse_json
from . import probe


@dataclass(frozen=True)
class Environment:
    """One Python environment as a kernel build sees it."""

    python: str
    python_version: str
    implementation: str
    os: str  # linux, darwin, windows
    cpu_arch: str  # x86_64, aarch64
    #: Wheel tags this interpreter accepts, best first (packaging's ``sys_tags``).
    supported_tags: tuple[str, ...]
    #: torch's distribution version (``2.13.0+cpu``): the exact pin for installers.
    torch_version: str | None
    torch_error: str | None = None
    cxx11_abi: bool | None = None
    cuda: str | None = None
    hip: str | None = None
    xpu: str | None = None
    mps: bool = False
    tvm_ffi_version: str | None = None
    free_threaded: bool = False
    #: The compute capability of torch's current CUDA device; None: no GPU visible.
    gpu_capability: tuple[int, int] | None = None
    gpu_name: str | None = None
    #: The target ID of torch's current ROCm device (``gcnArchName``: ``gfx942:sramecc+:xnack-``).
    gpu_arch_name: str | None = None

    @property
    def target_key(self) -> str | None:
        if self.torch_version is None or self.torch_error is not None:
            return None
        return target_key(self.torch_version, os=self.os, cxx11_abi=self.cxx11_abi,
                          cuda=self.cuda, hip=self.hip, xpu=self.xpu, mps=self.mps)

    @property
    def target(self) -> Target | None:
        key = self.target_key
        return parse_target_key(key) if key else None

    @property
    def tvm_ffi(self) -> tuple[int, int] | None:
        if not self.tvm_ffi_version:
            return None
        release = Version(self.tvm_ffi_version).release
        return release[0], (release[1] if len(release) > 1 else 0)

    def on_backend(self, backend: str | None) -> Environment:
        """This environment as a kernel for ``backend`` sees it (``install --backend``,
        the ``kernels`` library's ``backend=``): a CPU build runs on any torch, so ``cpu``
        is always there; another backend only where torch is built for it."""
        if backend is None or self.target is None or backend == self.target.backend:
            return self
        if backend != "cpu":
            also = "" if self.target.backend == "cpu" else f" or {self.target.backend}"
            raise UsageError(f"--backend {backend}: torch {self.torch_version} is built for "
                             f"{self.target.backend_tag}, so a {backend} build cannot run on it; "
                             f"give --backend cpu{also}, or --python with a torch built for "
                             f"{backend}")
        return replace(self, cuda=None, hip=None, xpu=None, mps=False)

    def describe(self) -> str:
        if self.torch_version is None:
            torch = "no torch"
        elif self.torch_error:
            torch = f"torch {self.torch_version} (cannot be imported)"
        else:
            torch = f"torch {self.torch_version} [{self.target_key}]"
        return f"{torch}, Python {self.python_version}, {self.os} {self.cpu_arch}"


def _tag_number(version: str, parts: int = 2) -> str:
    release = Version(version).release
    return "".join(str(n) for n in (release + (0, 0))[:parts])


def target_key(torch_version: str, *, os: str, cxx11_abi: bool | None, cuda: str | None,
               hip: str | None, xpu: str | None, mps: bool) -> str:
    """``torch<MAJ><MIN>`` + ``-cxx11``/``-cxx98`` (Linux only) + ``-<backend tag>``.

    >>> target_key("2.13.0+cpu", os="linux", cxx11_abi=True, cuda=None, hip=None,
    ...            xpu=None, mps=False)
    'torch213-cxx11-cpu'
    """
    release = Version(torch_version).release
    parts = [f"torch{release[0]}{release[1]}"]
    if os == "linux" and cxx11_abi is not None:
        parts.append("cxx11" if cxx11_abi else "cxx98")
    if cuda:
        parts.append("cu" + _tag_number(cuda))
    elif hip:
        parts.append("rocm" + _tag_number(hip.split("-")[0]))
    elif mps:
        parts.append("metal")
    elif xpu:
        # torch.version.xpu is the oneAPI compiler's 8-digit version (2025.3.0 ->
        # "20250300"); the loader and kernel-builder's names keep year and minor: xpu20253.
        parts.append(f"xpu{xpu[0:4]}{xpu[5:6]}")
    else:
        parts.append("cpu")
    return "-".join(parts)


def _normal_arch(machine: str) -> str:
    return {"amd64": "x86_64", "arm64": "aarch64", "x64": "x86_64"}.get(machine.lower(),
                                                                         machine.lower())


def environment_from_facts(facts: dict[str, Any]) -> Environment:
    version = facts.get("torch_version")
    try:
        if version is not None:
            Version(version)
    except InvalidVersion:
        facts["torch_error"] = f"torch reports an invalid version {version!r}"
    return Environment(
        python=facts["python"],
        python_version=facts["python_version"],
        implementation=facts["implementation"],
        os=facts["system"],
        cpu_arch=_normal_arch(facts["machine"]),
        supported_tags=tuple(facts["tags"]),
        torch_version=version,
        torch_error=facts.get("torch_error"),
        cxx11_abi=facts.get("cxx11_abi"),
        cuda=facts.get("cuda"),
        hip=facts.get("hip"),
        xpu=facts.get("xpu"),
        mps=bool(facts.get("mps")),
        tvm_ffi_version=facts.get("tvm_ffi_version"),
        free_threaded=bool(facts.get("free_threaded")),
        gpu_capability=_capability(facts.get("gpu_capability")),
        gpu_name=facts["gpu_name"] if isinstance(facts.get("gpu_name"), str) else None,
        gpu_arch_name=_amd_target(facts.get("gpu_arch_name")),
    )


def _amd_target(value: object) -> str | None:
    return value if isinstance(value, str) and parse_amd_target(value) is not None else None


def _capability(value: object) -> tuple[int, int] | None:
    if isinstance(value, list) and len(value) == 2 and all(type(n) is int and 0 <= n < 100 for n in value):
        return value[0], value[1]
    return None


def default_python() -> Path:
    """The activated virtual environment's Python, else the one running kernel-wheels."""
    if venv := os.environ.get("VIRTUAL_ENV"):
        for candidate in (Path(venv) / "bin" / "python", Path(venv) / "Scripts" / "python.exe"):
            if candidate.exists():
                return candidate
    return Path(sys.executable)


def target_python(python: Path | None = None) -> Path:
    """``python`` (``--python``) as an absolute path, or :func:`default_python`; a given
    one that does not exist is a usage error."""
    if python is None:
        return default_python().absolute()
    # The probes run in a scratch folder: a relative path must not be read from there.
    found = shutil.which(str(python)) if len(python.parts) == 1 else None
    resolved = Path(found) if found else python.absolute()
    if not resolved.is_file():
        raise UsageError(f"--python {python}: there is no Python interpreter there")
    return resolved


@dataclass(frozen=True)
class Preflight:
    """What the target Python says without importing anything heavy (milliseconds,
    where importing torch takes seconds to minutes on a loaded machine): the first
    answer of :class:`TargetProbe`."""

    python: str
    torch_version: str | None
    has_pip: bool


def _probe_folder(scratch: Path) -> dict[str, str]:
    """Our packaging, alone in a folder (a link to it), for an interpreter that has none;
    the probe runs in that folder so that nothing in the user's working folder shadows
    torch. The probe's environment: that folder, and where torch's build facts are kept."""
    (scratch / "packaging").symlink_to(Path(packaging.__file__).parent, target_is_directory=True)
    return {"KERNEL_WHEELS_PROBE_PATH": str(scratch),
            "KERNEL_WHEELS_PROBE_CACHE": str(cache_dir("torch-builds"))}


def read_environment(python: Path | None = None, timeout: float = 120) -> Environment:
    """Run the probe in ``python`` (default: :func:`default_python`): every question, in
    one call."""
    python = target_python(python)
    source = Path(probe.__file__).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="kernel-wheels-probe-") as scratch:
        facts = run_probe(python, source, "inspect the Python at", timeout, cwd=Path(scratch),
                          env=_probe_folder(Path(scratch)), args=probe.QUESTIONS)
    return _environment(python, facts)


def _environment(python: Path, facts: Any) -> Environment:
    try:
        return environment_from_facts(facts)
    except (ValueError, KeyError, TypeError) as exc:
        raise EnvironmentProbeError(f"unexpected answer from the Python at {python}: {exc}") \
            from None


@dataclass(frozen=True)
class Installed:
    """What the target environment holds, as ``install`` needs it."""

    #: site-packages (purelib, platlib): where installers write distributions.
    site: tuple[Path, ...]
    #: (name, version, top-level names, whether it is a kernel wheel) of every distribution.
    owners: tuple[tuple[str, str, tuple[str, ...], bool], ...]
    #: torch's dist-info folder.
    torch_dist_info: Path | None
    #: The standard library's top-level modules (``sys.stdlib_module_names``).
    stdlib: tuple[str, ...] = ()
    #: The top-level names ``import torch`` looked for (numpy, triton, ... if present).
    torch_imports: tuple[str, ...] = ()


class TargetProbe:
    """The one probe of the target Python for ``install``, running while the index is
    read: :meth:`early` answers at once (torch installed? pip?); the interpreter's tags
    and what is installed follow meanwhile; :meth:`finish` lets it ask torch (imported,
    or its build facts from the cache) and returns the environment and what is installed.
    The probe runs in an empty private folder (``python -c`` puts its working folder
    first on ``sys.path``, where a planted ``json.py`` would run instead)."""

    def __init__(self, python: Path, timeout: float = 120) -> None:
        self.python = python
        self.timeout = timeout
        self._scratch = tempfile.TemporaryDirectory(prefix="kernel-wheels-probe-")
        env = {**os.environ, "PYTHONWARNINGS": "ignore", **_probe_folder(Path(self._scratch.name))}
        source = Path(probe.__file__).read_text(encoding="utf-8")
        try:
            self._proc = subprocess.Popen(
                [str(python), "-c", source, "--early", *probe.QUESTIONS, "installed"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                cwd=self._scratch.name, env=env)
        except OSError as exc:
            self._scratch.cleanup()
            raise EnvironmentProbeError(f"cannot run {python}: {exc.strerror or exc}") from None

    def __enter__(self) -> TargetProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()
        self._scratch.cleanup()

    def early(self) -> Preflight:
        """Whether the Python runs, has torch installed and has pip (its first line)."""
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()  # python's start-up only: no torch yet
        if not line:
            _, err = self._proc.communicate()
            last = (err.strip().splitlines() or ["no output"])[-1]
            raise EnvironmentProbeError(f"cannot run {self.python}: {last}")
        try:
            facts = parse_json(line)
            return Preflight(str(facts["python"]), facts["torch"], bool(facts["pip"]))
        except (ValueError, KeyError, TypeError):
            raise EnvironmentProbeError(f"unexpected answer from the Python at {self.python}") \
                from None

    def finish(self) -> tuple[Environment, Installed]:
        """The environment and what is installed: torch is asked now (imported, unless
        its build's facts are in the cache)."""
        try:
            out, err = self._proc.communicate("go\n", timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise EnvironmentProbeError(f"{self.python} did not answer within {self.timeout:.0f} s") \
                from None
        lines = out.strip().splitlines()
        if self._proc.returncode != 0 or not lines:
            last = (err.strip().splitlines() or ["no output"])[-1]
            raise EnvironmentProbeError(f"cannot inspect the Python at {self.python}: {last}")
        try:
            facts = parse_json(lines[-1])
            installed = Installed(
                tuple(Path(str(p)) for p in facts["site"]),
                tuple((str(n), str(v), tuple(map(str, tops)), kernel is True)
                      for n, v, tops, kernel in facts["owners"]),
                Path(str(facts["torch_dist_info"])) if facts["torch_dist_info"] else None,
                tuple(map(str, facts.get("stdlib") or ())),
                tuple(map(str, facts.get("torch_imports") or ())))
        except (ValueError, KeyError, TypeError, RecursionError):
            raise EnvironmentProbeError(f"unexpected answer from the Python at {self.python}") \
                from None
        return _environment(self.python, facts), installed


def run_probe(python: Path, code: str, doing: str, timeout: float, *, cwd: Path | None = None,
              env: dict[str, str] | None = None, args: Sequence[str] = ()) -> Any:
    """Run ``code`` in ``python`` (``args``: its ``sys.argv[1:]``) and parse the JSON on
    its last line of output; every failure is one :class:`EnvironmentProbeError` saying
    it could not ``doing`` it."""
    try:
        proc = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, cwd=cwd,
                              env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
                              timeout=timeout)
    except OSError as exc:
        raise EnvironmentProbeError(f"cannot run {python}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProbeError(f"{python} did not answer within {timeout:.0f} s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentProbeError(f"cannot {doing} {python}: {last}")
    try:
        return parse_json(lines[-1])
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser recurses
        raise EnvironmentProbeError(f"unexpected answer from the Python at {python}") from None


def running_environment() -> Environment:
    """This Python's environment, asked in this process: the probe's facts but the GPU
    (which would cost a CUDA initialisation) and the wheel tags (nothing asked here
    chooses a wheel file)."""
    return environment_from_facts({**probe.answer(("python", "torch")), "tags": []})


def running_target_key() -> str | None:
    """The target key of the torch in *this* process (None without a usable torch)."""
    return running_environment().target_key


def run_probe_in_scratch(python: Path, code: str, doing: str, timeout: float) -> Any:
    """:func:`run_probe` from an empty private folder: ``python -c`` puts its working
    folder first on ``sys.path``, where a planted ``json.py`` would run instead."""
    with tempfile.TemporaryDirectory(prefix="kernel-wheels-probe-") as scratch:
        return run_probe(python, code, doing, timeout, cwd=Path(scratch))
