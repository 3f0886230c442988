"""The C++ dependencies of kernel components (``depends = ["cutlass_3_6"]``): their
include folders, by exact version, from

1. a source checkout named by an environment variable (as kernel-builder's CMake reads
   ``CUTLASS_SRC_DIR``);
2. the pinned PyPI wheel (``nvidia-cutlass==3.6.0.0``, checked against its sha256),
   installed or downloaded with pip, where PyPI has that version;
3. else the project's tagged source archive (``v3.9.2.tar.gz`` from NVIDIA/cutlass on
   GitHub, or the mirror ``KERNEL_WHEELS_CUTLASS_URL`` names), checked against the
   digest pinned in ``data/build_depends.json`` (see :mod:`.source_archive`).

Downloads are kept in kernel-wheels' cache (``build-depends``), once per version and
digest. What exists nowhere is an error naming what to set.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import data
from ..cache import cache_dir
from ..errors import BuildError
from ..kernel.digest import file_sha256
from ..reading import read_json
from .environment import tool_environment
from .source_archive import PinnedArchive, fetch


@dataclass(frozen=True)
class ResolvedDependency:
    name: str  # cutlass_3_6
    include_dirs: tuple[Path, ...]
    origin: str  # for the log: "nvidia-cutlass 3.6.0.0 (PyPI)", "CUTLASS_SRC_DIR=..."


def _describe(name: str, entry: dict[str, Any]) -> str:
    return f"{name} ({entry['project']} {entry['version']})" if "version" in entry else name


def _from_env(name: str, entry: dict[str, Any]) -> ResolvedDependency | None:
    variable = entry.get("env")
    folder = os.environ.get(variable) if variable else None
    if not folder:
        return None
    root = Path(folder).expanduser().resolve()
    dirs = tuple(root / d for d in entry["include"] if (root / d).is_dir())
    if not dirs:
        raise BuildError(f"{variable}={folder} has no {entry['include'][0]}/ folder: point it at a "
                         f"{entry['project']} {entry['version']} source checkout")
    return ResolvedDependency(name, dirs, f"{variable}={folder}")


def _download(pin: dict[str, Any], folder: Path) -> Path:
    """The pinned wheel, fetched with pip (the index and proxies pip is set up for)."""
    requirement = f"{pin['name']}=={pin['version']}"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "--dest", str(folder), requirement],
        capture_output=True, text=True, env=tool_environment(network=True))
    wheels = sorted(folder.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        why = (proc.stderr.strip().splitlines() or ["pip is not available"])[-1]
        raise BuildError(f"could not download {requirement} from the package index ({why})")
    return wheels[0]


def _from_pypi(name: str, entry: dict[str, Any], log: Any) -> ResolvedDependency:
    pin = entry["pypi"]
    target = cache_dir("build-depends") / f"{pin['name']}-{pin['version']}-{pin['sha256'][:12]}"
    root = target / pin["root"]
    if not target.is_dir():
        log(f"fetching {pin['name']}=={pin['version']} for {name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as temp:
            wheel = _download(pin, Path(temp))
            found = file_sha256(wheel)
            if found != pin["sha256"]:
                raise BuildError(f"{wheel.name} has sha256 {found}, not the pinned {pin['sha256']}: "
                                 "refusing to build with it")
            unpacked = Path(temp) / "unpacked"
            with zipfile.ZipFile(wheel) as archive:
                members = [m for m in archive.namelist() if m.startswith(pin["root"] + "/")]
                archive.extractall(unpacked, members)
            try:
                unpacked.rename(target)  # atomic: a half-unpacked folder is never seen
            except OSError:
                if not target.is_dir():  # another build won the race: use its copy
                    raise
    dirs = tuple(root / d for d in entry["include"] if (root / d).is_dir())
    return ResolvedDependency(name, dirs, f"{pin['name']} {pin['version']} (PyPI)")


def _archive_pin(entry: dict[str, Any], log: Any) -> PinnedArchive:
    """The archive of ``entry``'s version: URL (a mirror if the project's ``url_env`` is
    set) and digests (a table named by ``digests_env`` replaces the pinned ones, said in
    the log: for a mirror of versions kernel-wheels does not pin, and for tests)."""
    project: dict[str, Any] = data.load("build_depends")["_archives"][entry["project"]]
    archive: dict[str, Any] = entry["archive"]
    base = os.environ.get(project["url_env"]) or project["url"]
    url = f"{base.rstrip('/')}/{archive['tag']}.tar.gz"
    digests = {k: archive.get(k) for k in ("sha256", "nar")}
    table_path = os.environ.get(project["digests_env"])
    if table_path:
        try:
            table = read_json(Path(table_path), project["digests_env"], BuildError)
            digests = {k: table[entry["version"]].get(k) for k in ("sha256", "nar")}
        except (OSError, ValueError, KeyError, AttributeError, TypeError):
            raise BuildError(f"{project['digests_env']}={table_path} has no digests for "
                             f"{entry['project']} {entry['version']} (a JSON object "
                             f'{{"{entry["version"]}": {{"sha256": "..."}}}})') from None
        log(f"{entry['project']} {entry['version']}: digests from {project['digests_env']}="
            f"{table_path}, not kernel-wheels' pinned table")
    if not digests["sha256"] and not digests["nar"]:
        raise BuildError(f"no digest is pinned for {entry['project']} {entry['version']}'s archive: "
                         f"add one to data/build_depends.json or set {entry['env']} to a source "
                         "checkout")
    return PinnedArchive(url, f"{entry['project']} {entry['version']}", digests["sha256"],
                         digests["nar"], tuple(entry["include"]))


def _from_archive(name: str, entry: dict[str, Any], log: Any) -> ResolvedDependency:
    pin = _archive_pin(entry, log)
    digest = pin.sha256 or hashlib.sha256((pin.nar or "").encode()).hexdigest()
    target = cache_dir("build-depends") / f"{entry['project'].lower()}-{entry['version']}-{digest[:12]}"
    if not target.is_dir():
        fetch(pin, target, log)
    dirs = tuple(target / d for d in entry["include"] if (target / d).is_dir())
    checked = "sha256" if pin.sha256 else "Nix hash"
    return ResolvedDependency(name, dirs, f"{pin.name} from {pin.url} ({checked} checked)")


def _installed(name: str, entry: dict[str, Any]) -> ResolvedDependency | None:
    """The exact pinned distribution, already installed in the running environment."""
    from importlib import metadata

    pin = entry.get("pypi")
    if not pin:
        return None
    try:
        distribution = metadata.distribution(pin["name"])
    except metadata.PackageNotFoundError:
        return None
    if distribution.version != pin["version"]:
        return None
    root = Path(str(distribution.locate_file(pin["root"])))
    dirs = tuple(root / d for d in entry["include"] if (root / d).is_dir())
    return ResolvedDependency(name, dirs, f"{pin['name']} {pin['version']} (installed)") if dirs else None


def resolve(names: tuple[str, ...], backend: str, where: dict[str, str],
            log: Any = lambda _: None) -> tuple[ResolvedDependency, ...]:
    """Include folders of every dependency of one backend's components. ``where`` maps a
    dependency to the component that asked for it, for messages."""
    table: dict[str, Any] = data.load("build_depends")
    result = []
    for name in dict.fromkeys(names):
        entry = table[name]
        if entry.get("builtin"):
            continue
        if backend not in entry.get("backends", [backend]):
            raise BuildError(f"{where[name]} depends on {name}, which is for "
                             f"{'/'.join(entry['backends'])} kernels, not {backend}")
        resolved = _from_env(name, entry) or _installed(name, entry)
        if resolved is None and entry.get("pypi"):
            try:
                resolved = _from_pypi(name, entry, log)
            except BuildError as exc:
                raise BuildError(
                    f"{where[name]} depends on {_describe(name, entry)}: {exc.message}; install "
                    f"{entry['pypi']['name']}=={entry['pypi']['version']} or set {entry['env']} to a "
                    f"{entry['project']} {entry['version']} source checkout") from None
        if resolved is None and entry.get("archive"):
            try:
                resolved = _from_archive(name, entry, log)
            except BuildError as exc:
                raise BuildError(f"{where[name]} depends on {_describe(name, entry)}: "
                                 f"{exc.message}; or set {entry['env']} to a {entry['project']} "
                                 f"{entry['version']} source checkout") from None
        if resolved is None:
            how = (f"set {entry['env']} to a {entry['project']} {entry['version']} source checkout "
                   f"(it is not on PyPI)" if entry.get("env") else
                   f"kernel-wheels cannot provide {entry['project']}")
            raise BuildError(f"{where[name]} depends on {_describe(name, entry)}: {how}")
        log(f"{name}: {resolved.origin}")
        result.append(resolved)
    return tuple(result)
