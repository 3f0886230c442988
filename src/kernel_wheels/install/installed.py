"""The kernel wheels installed in a Python, and the ``LOCAL_KERNELS`` mapping that lets
the ``kernels`` library load them instead of going to the Hub.

Code that calls ``kernels.get_kernel("org/name", version=1)`` (transformers, TGI, vLLM
and most kernel users do) downloads from the Hub unless ``LOCAL_KERNELS`` maps the
repository to a local variant folder (``org/name=/path:org2/name2=/path2``). A kernel
wheel installs its variant folder unchanged at ``site-packages/<module>/<variant>/``
(``wheel/loader.py``), and records in its dist-info where it came from
(``kernel_wheels.json``: the repository's canonical URL, the commit, the variant): that
is all the mapping needs. The target Python is asked for its distributions in a
subprocess, so kernel-wheels need not be installed there.

A kernel whose metadata.json pins another kernel to a revision (``kernel-depends``) keeps
the pin in its record; LOCAL_KERNELS cannot carry one (it maps a repository to one
folder for every revision), so :func:`unmet_pins` names each pin the installed kernel is
not known to meet.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..confine import inside, shown
from ..errors import DistributionError, EnvironmentProbeError, UnsafeNameError, UsageError
from ..kernel.repo_id import is_repo_id, repo_id_of_hub_url
from .environment import run_probe, target_python

#: What the target Python runs: every distribution whose dist-info holds a provenance
#: record, with that record and where its files are.
PROBE = r"""
import importlib.metadata as metadata, json, sys
found = []
for dist in metadata.distributions():
    try:
        text = dist.read_text("kernel_wheels.json")
    except Exception:
        continue
    if not text:
        continue
    try:
        record = json.loads(text)
    except ValueError:
        continue
    found.append({"name": dist.metadata["Name"], "version": dist.version, "record": record,
                  "root": str(dist.locate_file("")),
                  "files": [str(path) for path in dist.files or []]})
print(json.dumps(found))
"""


@dataclass(frozen=True)
class RevisionPin:
    """A ``kernel-depends`` entry pinned to a revision (a commit, tag or branch)."""

    repo_id: str
    revision: str


@dataclass(frozen=True)
class InstalledKernel:
    distribution: str
    version: str
    #: The Hub repository it was converted from (None for a git or folder source).
    repo_id: str | None
    commit: str | None
    variant: str
    #: The installed variant folder, which ``kernels`` loads and verifies.
    path: Path
    #: The release tag at its commit (``v1.1.2``), if any.
    release: str | None = None
    #: The kernels it needs at a given revision (its metadata.json's kernel-depends).
    pins: tuple[RevisionPin, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"distribution": self.distribution, "version": self.version, "repo_id": self.repo_id,
                "commit": self.commit, "variant": self.variant, "path": str(self.path),
                "kernel_depends_pinned": [{"repo_id": pin.repo_id, "revision": pin.revision}
                                          for pin in self.pins]}


def _kernel(row: Any) -> InstalledKernel | None:
    """One probe row, if it is a kernel wheel of this layout whose folder is there."""
    if not isinstance(row, dict) or not isinstance(row.get("record"), dict):
        return None
    record = row["record"]
    folder = record.get("variant_folder")
    if record.get("wheel_layout") != 2 or not isinstance(folder, str):
        return None  # kernel-wheels 0.1 moved the kernel's files: nothing for kernels to load
    # A Hub source's own URL first; else a folder or git source's Hub repository
    # (to-wheel --repo-id, or the repo-id that build records from build.toml).
    recorded = record.get("repo_id")
    repo_id = repo_id_of_hub_url(str(record.get("source") or "")) \
        or (recorded if is_repo_id(recorded) else None)
    path = _own_folder(row, folder, repo_id)
    if not (path / "metadata.json").is_file():
        return None  # without metadata.json, kernels cannot load a folder
    variant = record.get("variant", {}).get("name") if isinstance(record.get("variant"), dict) else None
    release = record.get("release")
    return InstalledKernel(str(row.get("name")), str(row.get("version")), repo_id,
                           record.get("commit"), str(variant or folder.rsplit("/", 1)[-1]), path,
                           release if isinstance(release, str) else None, _pins(record))


def _pins(record: dict[str, Any]) -> tuple[RevisionPin, ...]:
    """The revision pins a record carries (``kernel_depends``; a wheel made before it was
    recorded: its metadata.json's ``kernel-depends``). Malformed entries are not pins."""
    entries = record.get("kernel_depends")
    if entries is None and isinstance(record.get("metadata_json"), dict):
        entries = record["metadata_json"].get("kernel-depends")
    if not isinstance(entries, list):
        return ()
    return tuple(RevisionPin(entry["repo-id"], entry["revision"]) for entry in entries
                 if isinstance(entry, dict) and is_repo_id(entry.get("repo-id"))
                 and isinstance(entry.get("revision"), str) and entry["revision"])


def unmet_pins(kernels: list[InstalledKernel]) -> list[str]:
    """One line per revision pin whose kernel is mapped (installed from the Hub) but not
    known to be that revision: its commit, an abbreviation of it, or its release tag.
    ``kernels`` would load the mapped folder whatever the pin says; a pin to a branch
    cannot be confirmed offline, so it is named too."""
    mapped = {kernel.repo_id.lower(): kernel for kernel in kernels if kernel.repo_id}
    lines = []
    for kernel in kernels:
        for pin in kernel.pins:
            found = mapped.get(pin.repo_id.lower())
            if found is None or _is_revision(found, pin.revision):
                continue  # not mapped: kernels fetches the pinned revision itself
            at = f"commit {shown(found.commit or 'unknown', 64)}" + \
                (f", release {shown(found.release, 40)}" if found.release else "")
            lines.append(f"{shown(kernel.distribution, 80)} pins {pin.repo_id} to revision "
                         f"'{shown(pin.revision, 80)}', but the installed {shown(found.distribution, 80)} "
                         f"{shown(found.version, 40)} ({at}) is not known to be it, and LOCAL_KERNELS "
                         "gives it to kernels for every revision")
    return lines


def _is_revision(kernel: InstalledKernel, revision: str) -> bool:
    commit = (kernel.commit or "").lower()
    if commit and re.fullmatch(r"[0-9a-f]{7,64}", revision.lower()) and commit.startswith(revision.lower()):
        return True
    return kernel.release is not None and revision == kernel.release


def _own_folder(row: dict[str, Any], folder: str, repo_id: str | None) -> Path:
    """The variant folder a distribution's record names, if the distribution installed
    it: its ``metadata.json`` is in the distribution's RECORD and the path stays in
    site-packages (no absolute path, no ``..``, no link out). Anything else would let
    any installed distribution send ``kernels`` to load any folder of the machine."""
    name = f"{shown(str(row.get('name')), 80)} {shown(str(row.get('version')), 40)}"
    root = Path(str(row.get("root")))
    files = row.get("files")
    refusal = DistributionError(
        f"{name} maps {repo_id or 'its kernel'} to {shown(folder)}, which is not among the "
        f"files {shown(str(row.get('name')), 80)} installed: refusing to map it (uninstall "
        "that distribution)")
    if not isinstance(files, list) or f"{folder}/metadata.json" not in files:
        raise refusal
    try:
        return inside(root, folder + "/metadata.json", "a kernel's variant folder").parent
    except UnsafeNameError:
        raise refusal from None


def _refuse_two_claims(kernels: list[InstalledKernel]) -> None:
    """One repository, one folder: ``kernels`` keeps the last of two (Hub ids ignore case)."""
    claims: dict[str, InstalledKernel] = {}
    for kernel in kernels:
        if kernel.repo_id is None:
            continue
        first = claims.setdefault(kernel.repo_id.lower(), kernel)
        if first is not kernel:
            raise DistributionError(
                f"{first.repo_id} is claimed by two installed distributions: "
                f"{first.distribution} {first.version} ({first.path}) and {kernel.distribution} "
                f"{kernel.version} ({kernel.path}); the kernels library would load only one: "
                "uninstall the other")


def installed_kernels(python: Path | None = None, timeout: float = 120) -> list[InstalledKernel]:
    """The kernel wheels installed in ``python`` (default: the activated venv's, else the
    one running kernel-wheels), sorted by distribution name."""
    python = target_python(python)
    rows = run_probe(python, PROBE, "list what is installed in", timeout)
    if not isinstance(rows, list):
        raise EnvironmentProbeError(f"unexpected answer from the Python at {python}")
    kernels = [kernel for row in rows if (kernel := _kernel(row)) is not None]
    kernels.sort(key=lambda kernel: kernel.distribution)
    _refuse_two_claims(kernels)
    return kernels


def local_kernels_value(kernels: list[InstalledKernel],
                        progress: Callable[[str], None] = lambda _: None) -> str:
    """``LOCAL_KERNELS``: ``org/name=/path`` for each kernel from the Hub, ``:``-joined.
    A kernel without a Hub repository is left out (``progress`` says so); a folder whose
    path holds ``:`` (the mapping's separator) is a usage error."""
    for kernel in kernels:
        if kernel.repo_id is None:
            progress(f"{kernel.distribution} {kernel.version} was not converted from the Hub: "
                     "it has no repository id to map")
        elif ":" in str(kernel.path) or "=" in kernel.repo_id:
            raise UsageError(f"{kernel.path} holds ':', which LOCAL_KERNELS cannot carry")
    return ":".join(f"{kernel.repo_id}={kernel.path}" for kernel in kernels if kernel.repo_id)
