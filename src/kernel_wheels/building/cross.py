"""Building CPU kernels for another architecture (``--target-arch aarch64`` on x86_64):
a cross compiler from the distribution's packages (Debian's ``g++-aarch64-linux-gnu``;
``$CXX`` names another), its binutils for the manylinux fixes, and torch's wheel for
that machine, of the running torch's version, for headers and libraries to link with.

The wheel comes from the package index pip is set up for (pip checks the index's
digest), once: its headers and CPU libraries are kept in kernel-wheels' cache
(``build-torch/<wheel file name>``), unpacked beside their final place and renamed in.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from .. import data
from ..cache import cache_dir
from ..confine import relative_path
from ..errors import BuildError
from .environment import tool_environment
from .toolchain import TorchEnv, torch_at

Log = Callable[[str], None]


def _target(arch: str) -> dict[str, str]:
    table: dict[str, dict[str, str]] = data.load("build_toolchain")["cross"]["targets"]
    if arch not in table:
        raise BuildError(f"--target-arch {arch}: kernel-wheels builds for {', '.join(sorted(table))}")
    return table[arch]


def tool_prefix(arch: str, host: str) -> str:
    """``aarch64-linux-gnu-`` for a cross build (its binutils), "" on the host."""
    return "" if arch == host else f"{_target(arch)['triple']}-"


def cross_compiler(arch: str) -> str:
    """``$CXX``, else the distribution's ``<triple>-g++``."""
    target = _target(arch)
    compiler = os.environ.get("CXX") or f"{target['triple']}-g++"
    if shutil.which(compiler) is None:
        raise BuildError(f"no {arch} cross compiler '{compiler}' found: install "
                         f"{target['debian_package']} (Debian, Ubuntu) or set CXX to one")
    return compiler


def _download_wheel(requirement: str, platform_tag: str, folder: Path) -> Path:
    python = f"{sys.version_info.major}{sys.version_info.minor}"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "--platform", platform_tag, "--python-version", python,
         "--implementation", "cp", "--dest", str(folder), requirement],
        capture_output=True, text=True, env=tool_environment(network=True))
    wheels = sorted(folder.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        why = (proc.stderr.strip().splitlines() or ["pip is not available"])[-1]
        raise BuildError(f"could not download {requirement} for {platform_tag} from the package "
                         f"index ({why})")
    return wheels[0]


def _kept(name: str, left_out: list[str]) -> bool:
    """The members of torch's wheel a CPU build needs: headers, version, CPU libraries."""
    if name == "torch/version.py" or name.startswith("torch/include/"):
        return True
    if name.startswith("torch/lib/") and name.count("/") == 2:
        return not any(fnmatch.fnmatchcase(name.rsplit("/", 1)[1], p) for p in left_out)
    return False


def _unpack(wheel: Path, target: Path) -> None:
    left_out: list[str] = data.load("build_toolchain")["cross"]["torch_libraries_left_out"]
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or not _kept(info.filename, left_out):
                continue
            destination = target.joinpath(*relative_path(info.filename, wheel.name).parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, destination.open("wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)


def target_torch(arch: str, running: TorchEnv, log: Log) -> TorchEnv:
    """torch of the running version, for ``arch``: unpacked once into the cache."""
    public = re.sub(r"\+.*$", "", running.torch_version)
    target = _target(arch)
    base = cache_dir("build-torch")
    base.mkdir(parents=True, exist_ok=True)
    found = sorted(base.glob(f"torch-{public}-*-{target['wheel_platform']}*"))
    if not found:
        log(f"fetching torch=={public} for {target['wheel_platform']} (headers and libraries)")
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=base) as temp:
            wheel = _download_wheel(f"torch=={public}", target["wheel_platform"], Path(temp))
            unpacked = Path(temp) / "unpacked"
            _unpack(wheel, unpacked)
            final = base / wheel.name.removesuffix(".whl")
            try:
                unpacked.rename(final)  # atomic: a half-unpacked torch is never seen
            except OSError:
                if not final.is_dir():
                    raise
            found = [final]
    return torch_at(found[0] / "torch", arch)
