"""The chosen file, verified before an installer sees it.

The index is hostile: the file it serves passed only its sha256 against the index's own
page. pip and uv then write every member where its path says, over any file there, and
run some members without being asked (``sitecustomize.py``, ``.pth`` files, scripts in
``bin/``). So the file must first pass ``kernel-wheels check`` (:func:`check_wheel`,
whose ``members`` rule keeps every file inside the kernel's package and dist-info), and
then its top-level names must not be ones another distribution of the target
environment installed: a wheel whose package is named ``torch`` passes any check of the
wheel alone, but would replace torch's ``__init__.py``.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..checks import check_wheel
from ..errors import DistributionError, EnvironmentProbeError
from .environment import run_probe_in_scratch

#: Runs in the target Python: every distribution with the top-level names its RECORD
#: lists inside site-packages (``torch`` for ``torch/__init__.py``, ``six.py``).
OWNERS_PROBE = r"""
import importlib.metadata as metadata, json
found = []
for dist in metadata.distributions():
    try:
        files = dist.files or []
        name = dist.metadata["Name"] or ""
    except Exception:
        continue
    tops = sorted({f.parts[0] for f in files if f.parts and f.parts[0] != ".."})
    found.append([str(name), str(dist.version), tops])
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Owner:
    """An installed distribution and the top-level names it installed."""

    name: str
    version: str
    tops: frozenset[str]


def verify_wheel(wheel: Path, filename: str, origin: str) -> None:
    """``check`` on the downloaded file under the name the index listed."""
    report = check_wheel(wheel, filename=filename)
    if not report.passed:
        raise DistributionError(f"{filename} from {origin} fails kernel-wheels check, so no "
                                f"installer saw it: {report.first_failure()}; nothing was "
                                "installed")


def installed_owners(python: str, timeout: float = 120) -> list[Owner]:
    rows = run_probe_in_scratch(Path(python), OWNERS_PROBE, "list what is installed in", timeout)
    try:
        return [Owner(str(name), str(version), frozenset(map(str, tops)))
                for name, version, tops in rows]
    except (TypeError, ValueError):
        raise EnvironmentProbeError(f"unexpected answer from the Python at {python}") from None


def refuse_foreign_names(wheel: Path, filename: str, project: str, owners: list[Owner],
                         python: str) -> None:
    """Refuse a wheel that would write into a top-level name another installed
    distribution (not an earlier release of this project) installed."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    folders = {name.split("/", 1)[0] for name in names if "/" in name}
    for owner in sorted(owners, key=lambda o: o.name.lower()):
        if canonicalize_name(owner.name) == project:
            continue  # an upgrade or reinstall replaces its own files
        shared = sorted(tops & owner.tops)
        if shared:
            what = f"{shared[0]}/" if shared[0] in folders else shared[0]
            raise DistributionError(f"{filename} would write into {what}, which {owner.name} "
                                    f"{owner.version} installed in {python}; nothing was "
                                    "installed")
