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
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
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
from ..progress import Progress, as_progress
from ..redaction import redact, strip_userinfo
from ..remote.find_links import LocalLinks, PageLinks, open_links
from ..remote.index_settings import IndexSettings
from ..remote.simple_client import IndexFile, SimpleClient
from ..remote.transport import DEFAULT_TIMEOUT
from .environment import Environment, read_environment

Place = SimpleClient | LocalLinks | PageLinks
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
           environment: Environment, pre: bool = False) -> Choice:
    """Decide for every file; pick the best fitting one (or none). Pre-releases (and the
    ``.devN`` snapshots of unreleased commits) only with ``pre``, a pin, or when nothing
    else fits, as pip decides."""
    target = environment.target
    if target is None:
        raise EnvironmentProbeError(_no_torch(environment))
    choice = _choose(requirement, files, environment, target, pre)
    if choice.chosen is None and not pre:
        with_pre = _choose(requirement, files, environment, target, True)
        if with_pre.chosen is not None:
            return with_pre
    return choice


def _choose(requirement: Requirement, files: Sequence[IndexFile], environment: Environment,
            target: Target, pre: bool) -> Choice:
    project = canonicalize_name(requirement.name)
    decisions = [_judge(f, project, requirement.specifier, environment, target, pre)
                 for f in files]
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
    #: ``NAME=value`` of the variables that give the installer the indexes, redacted.
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


def _installed_torch(python: str) -> str | None:
    proc = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


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


def _read_choice(places: Sequence[Place], requirement: Requirement, environment: Environment,
                 say: Progress, pre: bool) -> tuple[Choice, dict[str, Place]]:
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
    return choose(requirement, files, environment, pre), where


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


def install(requirement_text: str, settings: IndexSettings, *, python: Path | None = None,
            installer: str = "pip", dry_run: bool = False,
            progress: Progress | None = None, timeout: float = DEFAULT_TIMEOUT) -> InstallResult:
    say = as_progress(progress)
    if installer not in INSTALLERS:
        raise UsageError(f"--installer must be one of {', '.join(INSTALLERS)}")
    requirement = parse_requirement(requirement_text)
    say("reading the environment" + (f" of {python}" if python else ""))
    environment = read_environment(python)
    say(f"environment: {environment.describe()} ({environment.python})")
    if environment.target is None:
        raise EnvironmentProbeError(_no_torch(environment))
    say.detail(f"index from {settings.index_origin}")
    places = _open_places(settings, timeout)
    secrets = tuple(s for place in places for s in place.secrets)
    try:
        with tempfile.TemporaryDirectory(prefix="kernel-wheels-install-") as scratch:
            choice, where = _read_choice(places, requirement, environment, say, settings.pre)
            if choice.chosen is None:
                return InstallResult(choice, (), False)
            chosen = choice.chosen.file
            place = where[chosen.url]
            links = Path(scratch) / "links"
            links.mkdir()
            wheel = download_path(place, chosen, links)
            assert choice.chosen.wheel is not None
            pinned = f"{choice.project}=={choice.chosen.wheel.version}"
            constraints = _constraints(Path(scratch), environment)
            command = installer_command(installer, environment, pinned, links, constraints)
            shown_env = tuple(f"{name}={_shown(value, secrets)}" for name, value in
                              index_environment(installer, settings).items())
            if dry_run:
                return InstallResult(choice, tuple(command), False, shown_env)
            say(f"downloading {chosen.filename} from {place.show(chosen.url)}")
            download(place, chosen, wheel, say)
            dependencies = [d for d in wheel_dependencies(wheel)
                            if canonicalize_name(Requirement(d).name) != "torch"]
            if dependencies:
                say(f"installing what {pinned} requires with {installer}: {', '.join(dependencies)}")
                _run_installer(dependencies_command(installer, environment, dependencies,
                                                    constraints),
                               _child_environment(installer, settings), installer, secrets, say)
            say(f"installing {pinned} with {installer} (torch=={environment.torch_version} "
                "pinned)")
            local_only = IndexSettings((), (), settings.pre)
            _run_installer(command, _child_environment(installer, local_only), installer,
                           secrets, say)
    finally:
        for place in places:
            place.close()
    after = _installed_torch(environment.python)
    if after != environment.torch_version:
        raise DistributionError(f"the installer changed torch from {environment.torch_version} "
                                f"to {after}: reinstall torch=={environment.torch_version}")
    return InstallResult(choice, tuple(command), True, shown_env)
