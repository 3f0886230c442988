"""``install``: the one wheel an environment should get, installed without touching torch.

:func:`choose` is pure: given an environment and the files an index lists for a project,
it decides, for every file, whether it fits and why not, and picks what the Hub's loader
would pick (the newest release with a fitting build; in it, the loader's preferred
build; among equal builds, the best wheel tag). :func:`install` probes the target
interpreter, reads the index, chooses, downloads that exact file into a private
temporary folder (its sha256 checked against the index's), verifies it as ``check``
does and against what the environment's other distributions own (:mod:`.verify`),
runs pip or uv on it with the installed torch pinned by a constraint, and proves that
torch's files are as they were by the RECORDs the installer wrote (:mod:`.torch_record`).
The target interpreter is probed once (:class:`~.environment.TargetProbe`), while the
index is read.

The index's credentials never reach the installer's command line (where any user of
the machine can read them in ``/proc/<pid>/cmdline``): the installer gets the index,
for the file's dependencies, in its environment (``PIP_INDEX_URL``,
``UV_DEFAULT_INDEX``), which only the same user can read.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from ..confine import file_name, inside, shown
from ..errors import (
    DistributionError,
    EnvironmentProbeError,
    IndexServerError,
    NoMatchingWheelError,
    UsageError,
)
from ..index.targets import KernelWheel, Target, parse_kernel_wheel, preference, rejection
from ..index.wheelfacts import read_facts
from ..kernel.gpu_target import Gpu, parse_gpu_arch
from ..progress import Progress, as_progress
from ..provenance import Policy
from ..redaction import quoted, redact, strip_userinfo
from ..remote.find_links import LocalLinks, PageLinks, open_links
from ..remote.index_settings import IndexSettings
from ..remote.simple_client import IndexFile, SimpleClient
from ..remote.transport import DEFAULT_TIMEOUT
from .decision import Decision
from .environment import Environment, Installed, TargetProbe, target_python
from .gate import gate
from .gpu import GpuChoice, judge_gpu, target_gpu
from .torch_record import torch_changes, torch_record

Place = SimpleClient | LocalLinks | PageLinks
INSTALLERS = ("pip", "uv")
#: What a dry run's installer command names instead of the private folder (removed when
#: install returns): a folder the user makes, holding ``constraints.txt`` (``torch==`` the
#: installed version) and ``links-N/`` with the N-th chosen file.
DRY_RUN_FOLDER = "$KW_INSTALL_TMP"


@dataclass(frozen=True)
class Choice:
    project: str
    environment: Environment
    #: The chosen file first, then the other fitting ones (best first), then the rest.
    decisions: tuple[Decision, ...]
    chosen: Decision | None
    #: Why the chosen file won, one clause per line.
    why: tuple[str, ...]
    #: The GPU step: the GPU and what each CUDA build holds for it (install/gpu.py).
    gpu: GpuChoice | None = None
    #: Nothing fits a GPU torch: the file ``--backend cpu`` would choose (a CPU build that
    #: fits this torch's version, C++ ABI, Python and platform), or None.
    cpu_fit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "environment": {"python": self.environment.python,
                            "python_version": self.environment.python_version,
                            "torch": self.environment.torch_version,
                            "target": self.environment.target_key,
                            "os": self.environment.os, "arch": self.environment.cpu_arch},
            "chosen": self.chosen.to_dict() if self.chosen else None,
            "why": list(self.why),
            "files": [d.to_dict() for d in self.decisions],
            "gpu": self.gpu.to_dict() if self.gpu else None,
        }


def parse_requirement(text: str) -> Requirement:
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"'{quoted(text)}' is not a requirement like img2gray or img2gray==1.1.2: "
                         f"{quoted(str(exc))}") from None
    if requirement.url:
        raise UsageError("give a project name and version, not a URL (pip installs URLs)")
    return requirement


def _pinned(specifier: SpecifierSet) -> bool:
    return any(s.operator in ("==", "===") for s in specifier)


def _rank(wheel: KernelWheel, environment: Environment) -> tuple[Any, ...]:
    """Within one release: the loader's build order, then the installer's tag order."""
    tag_rank = {tag: i for i, tag in enumerate(environment.supported_tags)}
    best_tag = min(tag_rank.get(str(t), len(tag_rank)) for t in wheel.tags)
    # An unlabelled wheel (not a kernel build) ranks like torch-universal.
    build = preference(wheel.variant) if wheel.variant else (3, 0, 0, 1, 0, 0)
    return (build, best_tag, wheel.filename)


def _python_fits(requires_python: str, environment: Environment) -> bool:
    try:
        return SpecifierSet(requires_python).contains(environment.python_version,
                                                      prereleases=True)
    except InvalidSpecifier:
        return True  # what pip does with a malformed data-requires-python


def _judge(file: IndexFile, project: str, specifier: SpecifierSet, environment: Environment,
           target: Target, pre: bool = False) -> Decision:
    wheel = parse_kernel_wheel(file.filename) if file.filename.endswith(".whl") else None
    if wheel is None:
        return Decision(file, None, "not a wheel (kernel-wheels installs wheels only)")
    if wheel.project != project:
        return Decision(file, wheel, f"another project ({wheel.project})")
    if not specifier.contains(wheel.version, prereleases=True):
        return Decision(file, wheel, f"version {wheel.version.public} is not {specifier}")
    if wheel.version.is_prerelease and not (pre or _pinned(specifier)):
        return Decision(file, wheel, f"{wheel.version.public} is a pre-release (--pre installs "
                                     "pre-releases)")
    if file.yanked is not None and not _pinned(specifier):
        reason = f": {file.yanked}" if file.yanked else ""
        return Decision(file, wheel, f"yanked{reason}")
    if file.requires_python and not _python_fits(file.requires_python, environment):
        return Decision(file, wheel, f"needs Python {file.requires_python}, not "
                                     f"{environment.python_version}")
    supported = set(environment.supported_tags)
    if not any(str(tag) in supported for tag in wheel.tags):
        platforms = ", ".join(sorted(wheel.platforms))
        return Decision(file, wheel, f"for {platforms}, not this Python ({environment.os} "
                                     f"{environment.cpu_arch}, {environment.supported_tags[0]})")
    if wheel.variant is not None:
        unfit = rejection(target, wheel.variant, environment.tvm_ffi)
        if unfit is not None:
            return Decision(file, wheel, unfit)
    return Decision(file, wheel, None)


def _why(chosen: KernelWheel, others: Sequence[KernelWheel], target: Target) -> tuple[str, ...]:
    lines = [f"release {chosen.release} is the newest with a build that fits"]
    variant = chosen.variant
    if variant is None or variant.backend == "universal":
        lines.append("a universal (Python-only) build: no build for this torch and backend "
                     "is there")
    elif variant.noarch:
        lines.append(f"the Python-only build for {variant.backend}: no compiled build fits")
    elif variant.framework == "torch-stable-abi":
        lines.append(f"{variant.name}: a stable-ABI build for torch >= "
                     f"{variant.framework_version_str}, which the Hub's loader prefers")
    else:
        fit = f"{variant.name}: built for torch {variant.framework_version_str}"
        if variant.backend == "cuda" and variant.backend_tag != target.backend_tag:
            fit += (f" and CUDA {variant.backend_version}, the newest CUDA build not newer than "
                    f"this torch's {target.backend_tag}")
        else:
            fit += f" and {variant.backend_tag}"
        if variant.cxx_abi:
            fit += f" with the {variant.cxx_abi} C++ ABI"
        lines.append(fit + f" (this environment: {target.key})")
    same_release = [w for w in others if w.release == chosen.release]
    if same_release:
        lines.append("also fit, ranked lower in the Hub loader's order: "
                     + ", ".join(w.filename for w in same_release))
    return tuple(lines)


def choose(requirement: Requirement, files: Sequence[IndexFile],
           environment: Environment, pre: bool = False, gpu: Gpu | None = None) -> Choice:
    """Decide for every file; pick the best fitting one (or none). Pre-releases (and the
    ``.devN`` snapshots of unreleased commits) only with ``pre``, a pin, or when nothing
    else fits, as pip decides."""
    target = environment.target
    if target is None:
        raise EnvironmentProbeError(_no_torch(environment))
    choice = _choose(requirement, files, environment, target, pre, gpu)
    if choice.chosen is None and not pre:
        with_pre = _choose(requirement, files, environment, target, True, gpu)
        if with_pre.chosen is not None:
            return with_pre
    return choice


def _choose(requirement: Requirement, files: Sequence[IndexFile], environment: Environment,
            target: Target, pre: bool, gpu: Gpu | None = None) -> Choice:
    project = canonicalize_name(requirement.name)
    decisions = [_judge(f, project, requirement.specifier, environment, target, pre)
                 for f in files]
    decisions = [d for d in decisions if d.wheel is None or d.wheel.project == project]
    decisions, gpu_choice = judge_gpu(decisions, gpu, {f.filename: f.gpu_code for f in files})
    fitting = sorted((d for d in decisions if d.rejected is None),
                     key=lambda d: _rank(_wheel(d), environment))
    fitting.sort(key=lambda d: _wheel(d).release, reverse=True)  # stable: newest release first
    rejected = sorted((d for d in decisions if d.rejected is not None),
                      key=lambda d: d.file.filename)
    if not fitting:
        return Choice(project, environment, tuple(rejected), None, (), gpu_choice)
    chosen = fitting[0]
    why = (*_why(_wheel(chosen), [_wheel(d) for d in fitting[1:]], target),
           *gpu_choice.why(chosen.file.filename))
    return Choice(project, environment, (*fitting, *rejected), chosen, why, gpu_choice)


def _wheel(decision: Decision) -> KernelWheel:
    assert decision.wheel is not None
    return decision.wheel


def _no_torch(environment: Environment) -> str:
    if environment.torch_error:
        return (f"torch {environment.torch_version} in {environment.python} cannot be "
                f"imported ({environment.torch_error})")
    return (f"no torch in {environment.python}: install the torch you want first; kernel "
            "wheels are chosen for it and never change it")


# --- running the installer -------------------------------------------------------------


@dataclass(frozen=True)
class InstallResult:
    choice: Choice
    command: tuple[str, ...]  # no secret in it
    installed: bool
    #: ``NAME=value`` of the variables that give the installer the indexes, redacted.
    index_env: tuple[str, ...] = ()
    #: How many files torch's RECORD lists (none of them written by the installer).
    torch_files: int = 0


def _uv() -> str:
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise UsageError("--installer uv: uv is not installed (pip install uv)") from None
        return found


def _install_argv(installer: str, environment: Environment, constraints: Path,
                  arguments: Sequence[str]) -> list[str]:
    """``pip install`` or ``uv pip install`` into the environment, torch pinned."""
    if installer == "pip":
        return [environment.python, "-m", "pip", "install", "--no-input",
                "--disable-pip-version-check", "-c", str(constraints), *arguments]
    return [_uv(), "pip", "install", "--python", environment.python, "-c", str(constraints),
            *arguments]


def installer_command(installer: str, environment: Environment, requirement: str, links: Path,
                      constraints: Path) -> list[str]:
    """The installer's argv for the kernel's wheel: ``NAME==VERSION`` from a folder holding
    only the verified file, no index, no dependencies, torch pinned. A requirement by name
    and version, not a file path: pip and uv then record an index install (``pip freeze``
    says ``name==version``, with no direct_url.json), which requirement files, pip-audit
    and Dependabot understand. No index: with one, pip prefers the index's copy of the same
    file and downloads it a second time (its resolver tries equal candidates index first)."""
    return _install_argv(installer, environment, constraints,
                         ["--no-index", "--no-deps", "--find-links", str(links), requirement])


def dependencies_command(installer: str, environment: Environment, dependencies: Sequence[str],
                         constraints: Path) -> list[str]:
    """The installer's argv for the wheel's own requirements (its Requires-Dist), taken
    from the indexes (named in the environment, :func:`index_environment`), torch pinned;
    run before the wheel itself, so a dependency that cannot be had leaves the kernel
    uninstalled."""
    return _install_argv(installer, environment, constraints, dependencies)


def wheel_dependencies(wheel: Path) -> list[str]:
    """The Requires-Dist of a downloaded (hash-checked) wheel."""
    try:
        _, metadata = read_facts(wheel)
        found = BytesHeaderParser().parsebytes(metadata).get_all("Requires-Dist") or []
        return [str(Requirement(str(line).strip())) for line in found]
    except (ValueError, KeyError, OSError, zipfile.BadZipFile, InvalidRequirement) as exc:
        # packaging's messages point at the fault over several lines: one line here.
        raise DistributionError(f"{wheel.name} is not a readable wheel ({shown(str(exc), 160)}); "
                                "nothing was installed") from None


def index_environment(installer: str, settings: IndexSettings) -> dict[str, str]:
    """The variables that name the indexes (with their credentials) and the TLS files to
    the installer: the environment, which only the same user can read, not the argv."""
    env: dict[str, str] = {}
    main, *extra = settings.index_urls or ("",)
    tls = settings.tls
    if installer == "pip":
        env.update({"PIP_INDEX_URL": main} if main else {"PIP_NO_INDEX": "1"})
        if extra:
            env["PIP_EXTRA_INDEX_URL"] = " ".join(extra)
        if tls.cert:
            env["PIP_CERT"] = tls.cert
        if tls.client_cert:
            env["PIP_CLIENT_CERT"] = tls.client_cert
        return env
    env.update({"UV_DEFAULT_INDEX": main} if main else {"UV_NO_INDEX": "1"})
    if extra:
        env["UV_INDEX"] = " ".join(extra)
    if tls.cert:
        env["SSL_CERT_FILE"] = tls.cert
    if tls.client_cert:
        env["SSL_CLIENT_CERT"] = tls.client_cert
    return env


_REPLACED = ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_NO_INDEX",
             "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_FIND_LINKS",
             "UV_FIND_LINKS")


def _child_environment(installer: str, settings: IndexSettings) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _REPLACED}
    return {**env, **index_environment(installer, settings), "PIP_NO_INPUT": "1"}


def download_path(client: Place, file: IndexFile, folder: Path) -> Path:
    """Where ``file`` goes in ``folder``: its listed name, checked (a plain file name
    that leads nowhere else) before it becomes a path."""
    where = f"{client.display}: a listed file name"
    return inside(folder, file_name(file.filename, where), where)


def download(client: Place, file: IndexFile, target: Path, progress: Progress | None = None) -> None:
    """``file`` into ``target`` (which must not exist), its sha256 checked against the
    one the index lists."""
    digest = hashlib.sha256()
    task = as_progress(progress).task(f"downloading {file.filename}", None, "B")
    with target.open("xb") as out:

        def sink(chunk: bytes) -> None:
            digest.update(chunk)
            out.write(chunk)
            task.advance(len(chunk))

        try:
            client.fetch(file.url, sink)
        finally:
            task.finish()
    actual = digest.hexdigest()
    if file.sha256 is not None and actual != file.sha256:
        target.unlink()
        raise IndexServerError(f"{file.filename} from {client.display} has sha256 {actual}, "
                               f"not the {file.sha256} the index lists; nothing was installed")


def _run_installer(command: list[str], env: dict[str, str], installer: str,
                   secrets: Sequence[str], say: Progress) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode == 0:
        for line in redact(proc.stdout.strip(), secrets).splitlines():
            say.detail(f"  {installer}: {line}")
        return
    output = redact((proc.stderr or proc.stdout).strip(), secrets).splitlines()
    for line in output[-15:]:
        say(f"  {installer}: {line}")
    last = next((line for line in reversed(output) if line.strip()), "no output")
    if installer == "pip" and "No module named pip" in last:
        raise DistributionError(f"there is no pip in {command[0]}: use --installer uv")
    if "Permission denied" in last or "Read-only file system" in last:
        raise DistributionError(f"{installer} cannot write to the target environment's "
                                "site-packages (permission denied or a read-only file system): "
                                "install into a virtual environment you own (--python)")
    raise DistributionError(f"{installer} could not install {command[-1]}: {last.strip()}")


def _no_project(place: Place, project: str) -> str:
    """Why a place has no project, with a hint when the URL is not a Simple API."""
    message = f"{place.display} has no project {project}"
    if isinstance(place, SimpleClient):
        base = place.index_url.rstrip("/")
        if not base.endswith("simple"):
            guess = base + "/simple/"
            try:
                with SimpleClient(guess, timeout=place.timeout, tls=place.tls) as probe:
                    if probe.answers():
                        return (f"{message}: {place.display} is not a Simple API; "
                                f"{place.show(guess)} is (index URLs end in /simple/)")
            except (IndexServerError, UsageError):
                pass
            return message + " (is it a Simple API URL? they usually end in /simple/)"
    return message


def _read_files(places: Sequence[Place], requirement: Requirement,
                say: Progress) -> tuple[list[IndexFile], dict[str, Place]]:
    """Every file the places list for the requirement's project, and where each is."""
    files: list[IndexFile] = []
    where: dict[str, Place] = {}
    project = canonicalize_name(requirement.name)
    for place in places:
        say(f"reading {place.show(place.project_url(requirement.name))}")
        found = place.project_files(requirement.name)
        if found is None:
            say.detail(_no_project(place, project))
            continue
        for file in found:
            if file.url not in where:
                files.append(file)
                where[file.url] = place
    if not files:
        names = [_no_project(place, project) for place in places]
        raise NoMatchingWheelError("; ".join(names))
    return files, where


def _constraints(folder: Path, environment: Environment) -> Path:
    """The installed torch, pinned: the installer may not change it."""
    assert environment.torch_version is not None
    path = folder / "constraints.txt"
    path.write_text(f"torch=={environment.torch_version}\n")
    return path


def _shown(value: str, secrets: Sequence[str]) -> str:
    """A variable's value (URLs, space-separated) without credentials."""
    return redact(" ".join(strip_userinfo(word) for word in value.split()), secrets)


def _open_places(settings: IndexSettings, timeout: float) -> list[Place]:
    places: list[Place] = [SimpleClient(url, timeout=timeout, tls=settings.tls)
                           for url in settings.index_urls]
    places += [open_links(location, timeout, settings.tls) for location in settings.find_links]
    return places


def parse_requirements(texts: Sequence[str]) -> list[Requirement]:
    """Each kernel asked for, once; a name given twice is a usage error (pip's rule)."""
    requirements = [parse_requirement(text) for text in texts]
    if not requirements:
        raise UsageError("give the kernels to install: NAME[SPEC]..., or -r FILE")
    seen: dict[str, str] = {}
    for requirement, text in zip(requirements, texts, strict=True):
        name = canonicalize_name(requirement.name)
        if name in seen:
            raise UsageError(f"{name} is asked for twice ('{seen[name]}' and '{text}'): give it once")
        seen[name] = text
    return requirements


def _no_torch_early(python: Path, given: bool) -> str:
    which = "--python" if given else "the Python install runs for (--python)"
    return (f"no torch in {python}: install the torch you want first, or give {which} the "
            "Python that has it; kernel wheels are chosen for it and never change it")


@dataclass(frozen=True)
class InstallOptions:
    """How :func:`install_many` installs (the ``install`` command's options)."""

    #: The Python to install into (None: the activated virtual environment's, else the
    #: one running kernel-wheels).
    python: Path | None = None
    installer: str = "pip"  # or "uv"
    #: Choose and explain, install nothing.
    dry_run: bool = False
    #: Connect timeout, and the window in which each transfer must move 64 KiB/s.
    timeout: float = DEFAULT_TIMEOUT
    #: Choose builds for this backend instead of torch's own (cpu, cuda, rocm, xpu, metal).
    backend: str | None = None
    #: Install the kernels only, not the Python packages they require.
    no_deps: bool = False
    #: What each chosen wheel's provenance must prove before it is installed.
    policy: Policy = field(default_factory=Policy)
    #: The compute capability to install for (None: torch's current GPU, if any).
    gpu_arch: str | None = None


def install(requirement_text: str, settings: IndexSettings, options: InstallOptions = InstallOptions(),
            *, progress: Progress | None = None) -> InstallResult:
    """One kernel: :func:`install_many` of one requirement."""
    return install_many([requirement_text], settings, options, progress=progress)[0]


def install_many(requirement_texts: Sequence[str], settings: IndexSettings,
                 options: InstallOptions = InstallOptions(), *,
                 progress: Progress | None = None) -> list[InstallResult]:
    """Choose a wheel for each requirement, then install them all (or, when one has no
    fitting wheel, none: its result has no choice and nothing was installed).

    What costs nothing is checked first, in this order: the requirements' syntax, the
    installer, that the target Python exists and has torch (and pip) installed, then the
    indexes (reachable, credentials accepted, the projects there); only then is torch
    imported in the target Python, which takes seconds to minutes."""
    say = as_progress(progress)
    if options.installer not in INSTALLERS:
        raise UsageError(f"--installer must be one of {', '.join(INSTALLERS)}")
    if options.gpu_arch is not None:
        parse_gpu_arch(options.gpu_arch)  # a bad --gpu-arch: said before anything is read
    requirements = parse_requirements(requirement_texts)
    if options.installer == "uv":
        _uv()  # uv missing: a usage error now, not after the probe
    target = target_python(options.python)
    # The one probe of the target Python: its first answer at once, the rest (torch
    # imported, or its build's facts from the cache) while the index is read.
    with TargetProbe(target) as probe:
        early = probe.early()
        if early.torch_version is None:
            raise EnvironmentProbeError(_no_torch_early(target, options.python is not None))
        if options.installer == "pip" and not early.has_pip and not options.dry_run:
            raise DistributionError(f"there is no pip in {target}: use --installer uv (or run "
                                    f"{target} -m ensurepip)")
        return _install_probed(requirements, settings, options, probe, target, say)


def _install_probed(requirements: Sequence[Requirement], settings: IndexSettings,
                    options: InstallOptions, probe: TargetProbe, target: Path,
                    say: Progress) -> list[InstallResult]:
    say.detail(f"index from {settings.index_origin}")
    places = _open_places(settings, options.timeout)
    secrets = tuple(s for place in places for s in place.secrets)
    try:
        listed = [_read_files(places, requirement, say) for requirement in requirements]
        say(f"reading the environment of {target}")
        environment, installed = probe.finish()
        say(f"environment: {environment.describe()} ({environment.python})")
        if environment.target is None:
            raise EnvironmentProbeError(_no_torch(environment))
        gpu = target_gpu(options.gpu_arch, environment)
        chosen_on = environment.on_backend(options.backend)
        if chosen_on is not environment:
            say(f"--backend {options.backend}: choosing builds for {chosen_on.target_key}")
        if options.gpu_arch is not None and (gpu_unused := _gpu_arch_unused(options, chosen_on)):
            say(f"warning: --gpu-arch {options.gpu_arch} is not used: {gpu_unused}")
        choices = [(choose(requirement, files, chosen_on, settings.pre, gpu), where)
                   for requirement, (files, where) in zip(requirements, listed, strict=True)]
        unfit = [(choice, requirement, files) for (choice, _), requirement, (files, _)
                 in zip(choices, requirements, listed, strict=True) if choice.chosen is None]
        if unfit:
            return [InstallResult(_with_cpu_fit(choice, requirement, files, settings.pre, gpu),
                                  (), False)
                    for choice, requirement, files in unfit]
        with tempfile.TemporaryDirectory(prefix="kernel-wheels-install-") as scratch:
            return _install_chosen(choices, environment, installed, Path(scratch), settings,
                                   options.installer, options.dry_run, options.no_deps, secrets,
                                   say, options.policy)
    finally:
        for place in places:
            place.close()


def _with_cpu_fit(choice: Choice, requirement: Requirement, files: Sequence[IndexFile],
                  pre: bool, gpu: Gpu | None) -> Choice:
    """``choice`` (nothing fits) with the file ``--backend cpu`` would choose, when torch
    is built for a GPU: the error then names that option only when taking it works."""
    target = choice.environment.target
    if target is None or target.backend == "cpu":
        return choice
    on_cpu = choose(requirement, files, choice.environment.on_backend("cpu"), pre, gpu)
    if on_cpu.chosen is None:
        return choice
    return replace(choice, cpu_fit=on_cpu.chosen.file.filename)


def _gpu_arch_unused(options: InstallOptions, chosen_on: Environment) -> str | None:
    """Why a --gpu-arch cannot matter (no GPU build is chosen for this torch), or None."""
    target = chosen_on.target
    if target is None or target.backend in ("cuda", "rocm"):
        return None
    if options.backend is not None:
        return f"--backend {options.backend} chooses builds for {chosen_on.target_key}"
    return f"torch {chosen_on.torch_version} has no CUDA or ROCm, so no GPU build is chosen"


@dataclass(frozen=True)
class _Planned:
    """One chosen kernel on its way in: where its file is, where it goes, the argv."""

    choice: Choice
    place: Place
    file: IndexFile
    wheel: Path
    pinned: str
    command: tuple[str, ...]


def _install_chosen(choices: Sequence[tuple[Choice, dict[str, Place]]], environment: Environment,
                    installed: Installed, scratch: Path, settings: IndexSettings, installer: str,
                    dry_run: bool, no_deps: bool, secrets: Sequence[str], say: Progress,
                    policy: Policy) -> list[InstallResult]:
    """Download every chosen file (sha256 checked) and verify it (``check``'s rules, the
    names other distributions own, its provenance under ``policy``) before any installer
    runs; then install every kernel's dependencies, then the kernels, torch pinned; torch
    proven unchanged by the RECORDs the installer wrote (:mod:`.torch_record`)."""
    constraints = _constraints(scratch, environment)
    # A dry run's commands name the folder the user makes (the private one is removed).
    folder = Path(DRY_RUN_FOLDER) if dry_run else scratch
    shown_env = tuple(f"{name}={_shown(value, secrets)}" for name, value in
                      index_environment(installer, settings).items())
    planned = []
    for index, (choice, where) in enumerate(choices):
        assert choice.chosen is not None and choice.chosen.wheel is not None
        file = choice.chosen.file
        links = scratch / f"links-{index}"
        links.mkdir()
        pinned = f"{choice.project}=={choice.chosen.wheel.version}"
        command = installer_command(installer, environment, pinned, folder / links.name,
                                    folder / constraints.name)
        place = where[file.url]
        planned.append(_Planned(choice, place, file, download_path(place, file, links), pinned,
                                tuple(command)))
    if dry_run:
        return [InstallResult(p.choice, p.command, False, shown_env) for p in planned]
    for p in planned:
        say(f"downloading {p.file.filename} from {p.place.show(p.file.url)}")
        download(p.place, p.file, p.wheel, say)
        # The file is judged, not the index: the one verdict, for this environment and GPU.
        gpu = p.choice.gpu.gpu if p.choice.gpu else None
        report = gate(p.wheel, p.file.filename, p.place.display, policy, installed, p.choice.project,
                      gpu, p.file.gpu_code)
        for finding in report.not_verified:
            if finding.check == "contract":  # said, never passed silently (a wheel of another release)
                say(f"note: {p.file.filename}: {finding.message}")
    assert environment.torch_version is not None
    torch_before = torch_record(installed, environment.torch_version)
    if torch_before is None:
        raise EnvironmentProbeError(_no_torch(environment))
    try:
        # Every kernel's dependencies first: one that cannot be had leaves no kernel installed.
        for p in planned:
            dependencies = [d for d in wheel_dependencies(p.wheel)
                            if canonicalize_name(Requirement(d).name) != "torch"]
            if dependencies and no_deps:
                say(f"--no-deps: not installing what {p.pinned} requires: {', '.join(dependencies)}")
            elif dependencies:
                say(f"installing what {p.pinned} requires with {installer}: {', '.join(dependencies)}")
                _run_installer(dependencies_command(installer, environment, dependencies,
                                                    constraints),
                               _child_environment(installer, settings), installer, secrets, say)
        local_only = IndexSettings((), (), settings.pre)
        for p in planned:
            say(f"installing {p.pinned} with {installer} (torch=={environment.torch_version} pinned)")
            _run_installer(list(p.command), _child_environment(installer, local_only), installer,
                           secrets, say)
    except DistributionError as failed:
        # An installer that failed may have run a dependency that wrote into torch/.
        if changed := torch_changes(torch_before, installer_failed=True):
            raise DistributionError(f"{failed.message}; and {changed}") from None
        raise
    changed = torch_changes(torch_before)
    if changed is not None:
        raise DistributionError(changed)
    return [InstallResult(p.choice, p.command, True, shown_env, len(torch_before.files))
            for p in planned]
