"""``install``: the one wheel an environment should get, installed without touching torch.

:func:`choose` is pure: given an environment and the files an index lists for a project,
it decides, for every file, whether it fits and why not, and picks what the Hub's loader
would pick (the newest release with a fitting build; in it, the loader's preferred
build; among equal builds, the best wheel tag). :func:`install` probes the target
interpreter, reads the index, chooses, downloads that exact file into a private
temporary folder (its sha256 checked against the index's), and runs pip or uv on it
with the installed torch pinned by a constraint.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from ..confine import file_name, inside
from ..errors import (
    DistributionError,
    EnvironmentProbeError,
    IndexServerError,
    NoMatchingWheelError,
    UsageError,
)
from ..redaction import redact, strip_userinfo
from .environment import Environment, read_environment
from .simple_client import IndexFile, SimpleClient
from .targets import KernelWheel, Target, parse_kernel_wheel, preference, rejection
from .transport import DEFAULT_TIMEOUT

Progress = Callable[[str], None]
INSTALLERS = ("pip", "uv")


@dataclass(frozen=True)
class Decision:
    """One file of the project and what became of it."""

    file: IndexFile
    wheel: KernelWheel | None
    #: Why it does not fit; None when it fits.
    rejected: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"wheel": self.file.filename, "url": self.file.url,
                "fits": self.rejected is None, "reason": self.rejected}


@dataclass(frozen=True)
class Choice:
    project: str
    environment: Environment
    #: The chosen file first, then the other fitting ones (best first), then the rest.
    decisions: tuple[Decision, ...]
    chosen: Decision | None
    #: Why the chosen file won, one clause per line.
    why: tuple[str, ...]

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
        }


def parse_requirement(text: str) -> Requirement:
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"'{text}' is not a requirement like img2gray or img2gray==1.1.2: "
                         f"{exc}") from None
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
           target: Target) -> Decision:
    wheel = parse_kernel_wheel(file.filename) if file.filename.endswith(".whl") else None
    if wheel is None:
        return Decision(file, None, "not a wheel (kernel-wheels installs wheels only)")
    if wheel.project != project:
        return Decision(file, wheel, f"another project ({wheel.project})")
    if not specifier.contains(wheel.version, prereleases=True if _pinned(specifier) else None):
        return Decision(file, wheel, f"version {wheel.version.public} is not {specifier}")
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
           environment: Environment) -> Choice:
    """Decide for every file; pick the best fitting one (or none)."""
    target = environment.target
    if target is None:
        raise EnvironmentProbeError(_no_torch(environment))
    project = canonicalize_name(requirement.name)
    decisions = [_judge(f, project, requirement.specifier, environment, target) for f in files]
    decisions = [d for d in decisions if d.wheel is None or d.wheel.project == project]
    fitting = sorted((d for d in decisions if d.rejected is None),
                     key=lambda d: _rank(_wheel(d), environment))
    fitting.sort(key=lambda d: _wheel(d).release, reverse=True)  # stable: newest release first
    rejected = sorted((d for d in decisions if d.rejected is not None),
                      key=lambda d: d.file.filename)
    if not fitting:
        return Choice(project, environment, tuple(rejected), None, ())
    chosen = fitting[0]
    why = _why(_wheel(chosen), [_wheel(d) for d in fitting[1:]], target)
    return Choice(project, environment, (*fitting, *rejected), chosen, why)


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
    #: ``NAME=value`` of the variables that give the installer the index, redacted.
    index_env: tuple[str, ...] = ()


def _uv() -> str:
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise UsageError("--installer uv: uv is not installed (pip install uv)") from None
        return found


def installer_command(installer: str, environment: Environment, wheel: Path,
                      constraints: Path) -> list[str]:
    """The installer's argv: the downloaded file, torch pinned; the index is not in
    it (see :func:`index_environment`)."""
    if installer == "pip":
        return [environment.python, "-m", "pip", "install", "--no-input",
                "--disable-pip-version-check", "-c", str(constraints), str(wheel)]
    return [_uv(), "pip", "install", "--python", environment.python, "-c", str(constraints),
            str(wheel)]


def index_environment(installer: str, index_url: str) -> dict[str, str]:
    """The variables that name the index (with its credentials) to the installer."""
    if installer == "pip":
        return {"PIP_INDEX_URL": index_url}
    return {"UV_DEFAULT_INDEX": index_url}


def _child_environment(installer: str, index_url: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "PIP_INDEX_URL")}
    return {**env, **index_environment(installer, index_url), "PIP_NO_INPUT": "1"}


def _installed_torch(python: str) -> str | None:
    proc = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def download_path(client: SimpleClient, file: IndexFile, folder: Path) -> Path:
    """Where ``file`` goes in ``folder``: its listed name, checked (a plain file name
    that leads nowhere else) before it becomes a path."""
    where = f"{client.display}: a listed file name"
    return inside(folder, file_name(file.filename, where), where)


def download(client: SimpleClient, file: IndexFile, target: Path) -> None:
    """``file`` into ``target`` (which must not exist), its sha256 checked against the
    one the index lists."""
    digest = hashlib.sha256()
    with target.open("xb") as out:

        def sink(chunk: bytes) -> None:
            digest.update(chunk)
            out.write(chunk)

        client.fetch(file.url, sink)
    actual = digest.hexdigest()
    if file.sha256 is not None and actual != file.sha256:
        target.unlink()
        raise IndexServerError(f"{file.filename} from {client.display} has sha256 {actual}, "
                               f"not the {file.sha256} the index lists; nothing was installed")


def _run_installer(command: list[str], env: dict[str, str], installer: str,
                   secrets: Sequence[str], say: Progress) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode == 0:
        return
    output = redact((proc.stderr or proc.stdout).strip(), secrets).splitlines()
    for line in output[-15:]:
        say(f"  {installer}: {line}")
    last = next((line for line in reversed(output) if line.strip()), "no output")
    if installer == "pip" and "No module named pip" in last:
        raise DistributionError(f"there is no pip in {command[0]}: use --installer uv")
    wheel = Path(command[-1]).name
    raise DistributionError(f"{installer} could not install {wheel}: {last.strip()}")


def _read_choice(client: SimpleClient, requirement: Requirement, environment: Environment,
                 say: Progress) -> Choice:
    say(f"reading {client.show(client.project_url(requirement.name))}")
    files = client.project_files(requirement.name)
    if files is None:
        raise NoMatchingWheelError(f"{client.display} has no project "
                                   f"{canonicalize_name(requirement.name)}")
    return choose(requirement, files, environment)


def _constraints(folder: Path, environment: Environment) -> Path:
    """The installed torch, pinned: the installer may not change it."""
    assert environment.torch_version is not None
    path = folder / "constraints.txt"
    path.write_text(f"torch=={environment.torch_version}\n")
    return path


def install(requirement_text: str, index_url: str, *, python: Path | None = None,
            installer: str = "pip", dry_run: bool = False,
            progress: Progress | None = None, timeout: float = DEFAULT_TIMEOUT) -> InstallResult:
    say = progress or (lambda _message: None)
    if installer not in INSTALLERS:
        raise UsageError(f"--installer must be one of {', '.join(INSTALLERS)}")
    requirement = parse_requirement(requirement_text)
    say("reading the environment" + (f" of {python}" if python else ""))
    environment = read_environment(python)
    say(f"environment: {environment.describe()} ({environment.python})")
    if environment.target is None:
        raise EnvironmentProbeError(_no_torch(environment))
    client = SimpleClient(index_url, timeout=timeout)
    with client, tempfile.TemporaryDirectory(prefix="kernel-wheels-install-") as scratch:
        choice = _read_choice(client, requirement, environment, say)
        if choice.chosen is None:
            return InstallResult(choice, (), False)
        chosen = choice.chosen.file
        folder = Path(scratch)
        wheel = download_path(client, chosen, folder)
        command = installer_command(installer, environment, wheel, _constraints(folder, environment))
        shown_env = tuple(f"{name}={client.show(value)}" for name, value in
                          index_environment(installer, strip_userinfo(index_url)).items())
        if dry_run:
            return InstallResult(choice, tuple(command), False, shown_env)
        say(f"downloading {chosen.filename} from {client.show(chosen.url)}")
        download(client, chosen, wheel)
        say(f"installing {chosen.filename} with {installer} (torch=={environment.torch_version} "
            "pinned)")
        _run_installer(command, _child_environment(installer, client.index_url), installer,
                       client.secrets, say)
    after = _installed_torch(environment.python)
    if after != environment.torch_version:
        raise DistributionError(f"the installer changed torch from {environment.torch_version} "
                                f"to {after}: reinstall torch=={environment.torch_version}")
    return InstallResult(choice, tuple(command), True, shown_env)
