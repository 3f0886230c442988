"""The C++ dependencies of kernel components (``depends = ["cutlass_3_6"]``): their
include folders, from a source checkout named by an environment variable (as
kernel-builder's CMake reads ``CUTLASS_SRC_DIR``), else from a pinned PyPI wheel
(``nvidia-cutlass==3.6.0.0``, checked against its sha256) kept in kernel-wheels' cache.
What exists nowhere is an error naming what to install.
"""

from __future__ import annotations

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
        capture_output=True, text=True)
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
        if resolved is None:
            how = (f"set {entry['env']} to a {entry['project']} {entry['version']} source checkout "
                   f"(it is not on PyPI)" if entry.get("env") else
                   f"kernel-wheels cannot provide {entry['project']}")
            raise BuildError(f"{where[name]} depends on {_describe(name, entry)}: {how}")
        log(f"{name}: {resolved.origin}")
        result.append(resolved)
    return tuple(result)
