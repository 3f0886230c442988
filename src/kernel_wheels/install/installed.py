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

A wheel of a folder or git source maps the Hub repository it records, and says where that
id came from (``repo_id_from``): the build's own metadata.json, or ``to-wheel --repo-id``
typed by hand. ``kernels.get_kernel(id)`` loads whatever folder an id is mapped to, so an
id typed by hand is a claim nothing on the machine confirms: it is mapped only when the
user of the machine opts in (``--allow-hand-ids``, ``KERNEL_WHEELS_ALLOW_HAND_IDS=1``), and
an id that does not name the kernel is never mapped (issue #37).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..confine import inside, shown
from ..errors import DistributionError, EnvironmentProbeError, UnsafeNameError, UsageError
from ..kernel.repo_id import (
    REPO_ID_BY_HAND,
    REPO_ID_FROM_BUILD,
    REPO_ID_FROM_HUB,
    is_repo_id,
    kernel_named_by,
    names_kernel,
    repo_id_of_hub_url,
)
from ..reading import read_json
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


#: An id whose origin the record does not give (wheels of earlier releases recorded
#: none), or gives in a way its installed metadata.json does not bear out: taken as
#: typed by hand.
REPO_ID_UNCONFIRMED = "unconfirmed"
#: The environment's opt-in to map ids typed by hand (``1``; ``0`` or unset: not mapped).
ALLOW_HAND_IDS = "KERNEL_WHEELS_ALLOW_HAND_IDS"
#: Where each id came from, as local-kernels says it.
ORIGINS = {
    REPO_ID_FROM_HUB: "from the Hub repository it was converted from",
    REPO_ID_FROM_BUILD: "from its build's metadata.json (build.toml's [general.hub] repo-id)",
    REPO_ID_BY_HAND: "typed by hand (to-wheel --repo-id)",
    REPO_ID_UNCONFIRMED: "of no recorded origin (taken as typed by hand)",
}


def hand_ids_allowed(given: bool | None = None) -> bool:
    """Whether ids typed by hand are mapped: ``given`` (``--allow-hand-ids`` or
    ``--no-allow-hand-ids``), else ``KERNEL_WHEELS_ALLOW_HAND_IDS`` (``1``: yes; ``0``
    or unset: no; anything else is a usage error)."""
    if given is not None:
        return given
    value = os.environ.get(ALLOW_HAND_IDS, "").strip()
    if value not in ("", "0", "1"):
        raise UsageError(f"{ALLOW_HAND_IDS}={shown(repr(value), 40)}: set it to 1 (map repository "
                         "ids typed by hand) or 0")
    return value == "1"


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
    #: Where ``repo_id`` came from (:data:`ORIGINS`' keys; None: there is no id).
    repo_id_from: str | None = None
    #: The kernel's name: its installed metadata.json's, else its record's.
    kernel_name: str | None = None

    @property
    def by_hand(self) -> bool:
        """Whether its id is one typed by hand (or of no recorded origin)."""
        return self.repo_id_from in (REPO_ID_BY_HAND, REPO_ID_UNCONFIRMED)

    def left_out(self, allow_hand_ids: bool = False) -> str | None:
        """Why ``LOCAL_KERNELS`` leaves this kernel out, in one line (None: it maps it)."""
        who = f"{shown(self.distribution, 80)} {shown(self.version, 40)}"
        if self.repo_id is None:
            return f"{who} was not converted from the Hub: it has no repository id to map"
        if self.repo_id_from != REPO_ID_FROM_HUB and not names_kernel(self.repo_id, self.kernel_name or ""):
            return (f"{who} records the repository id {self.repo_id}, which names the kernel "
                    f"{kernel_named_by(self.repo_id)}, not its kernel {shown(str(self.kernel_name), 80)}: "
                    "not mapped (convert it again with an id that names it)")
        if self.by_hand and not allow_hand_ids:
            return (f"{who}: its repository id {self.repo_id} is {ORIGINS[str(self.repo_id_from)]}: "
                    f"not mapped; if you trust it, map it with --allow-hand-ids (or {ALLOW_HAND_IDS}=1)")
        return None

    def to_dict(self, allow_hand_ids: bool = False) -> dict[str, Any]:
        left_out = self.left_out(allow_hand_ids)
        return {"distribution": self.distribution, "version": self.version, "repo_id": self.repo_id,
                "repo_id_from": self.repo_id_from, "mapped": left_out is None, "left_out": left_out,
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
    repo_id = repo_id_of_hub_url(str(record.get("source") or ""))
    origin = REPO_ID_FROM_HUB if repo_id is not None else None
    if repo_id is None and is_repo_id(recorded):
        repo_id = recorded
    path = _own_folder(row, folder, repo_id)
    if not (path / "metadata.json").is_file():
        return None  # without metadata.json, kernels cannot load a folder
    metadata = _installed_metadata(path)
    if origin is None and repo_id is not None:
        said = record.get("repo_id_from")
        confirmed = said == REPO_ID_BY_HAND or (said == REPO_ID_FROM_BUILD
                                                and metadata.get("repo-id") == repo_id)
        # No origin recorded (an earlier release), or one its metadata.json denies.
        origin = str(said) if confirmed else REPO_ID_UNCONFIRMED
    name = next((value for value in (metadata.get("name"), record.get("kernel_name"), record.get("module"))
                 if isinstance(value, str) and value), None)
    variant = record.get("variant", {}).get("name") if isinstance(record.get("variant"), dict) else None
    release = record.get("release")
    return InstalledKernel(str(row.get("name")), str(row.get("version")), repo_id,
                           record.get("commit"), str(variant or folder.rsplit("/", 1)[-1]), path,
                           release if isinstance(release, str) else None, _pins(record),
                           origin, name)


def _installed_metadata(folder: Path) -> dict[str, Any]:
    """The installed variant folder's metadata.json (what ``kernels`` reads), read as a
    small file from outside; empty when it is not a JSON object (kernels refuses it)."""
    try:
        document = read_json(folder / "metadata.json", "metadata.json", ValueError)
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


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


def unmet_pins(kernels: list[InstalledKernel], allow_hand_ids: bool | None = None) -> list[str]:
    """One line per revision pin whose kernel is mapped (:func:`local_kernels_value`,
    ``allow_hand_ids`` as there) but not known to be that revision: its commit, an
    abbreviation of it, or its release tag. ``kernels`` would load the mapped folder
    whatever the pin says; a pin to a branch cannot be confirmed offline, so it is named
    too."""
    allowed = hand_ids_allowed(allow_hand_ids)
    mapped = {kernel.repo_id.lower(): kernel for kernel in kernels
              if kernel.repo_id and kernel.left_out(allowed) is None}
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
                        progress: Callable[[str], None] = lambda _: None,
                        allow_hand_ids: bool | None = None) -> str:
    """``LOCAL_KERNELS``: ``org/name=/path`` for each mapped kernel, ``:``-joined.
    ``progress`` gets one line per kernel: the id it is mapped to and where that id came
    from, or why it is left out (no repository id; an id that names another kernel; an
    id typed by hand while ``allow_hand_ids``, default :func:`hand_ids_allowed`, is
    off). A folder whose path holds ``:`` (the mapping's separator) is a usage error."""
    allowed = hand_ids_allowed(allow_hand_ids)
    mapped = []
    for kernel in kernels:
        if (why := kernel.left_out(allowed)) is not None:
            # A kernel with an id the user may expect mapped: a warning (shown under -q).
            progress(why if kernel.repo_id is None else f"warning: {why}")
            continue
        if ":" in str(kernel.path) or "=" in str(kernel.repo_id):
            raise UsageError(f"{kernel.path} holds ':', which LOCAL_KERNELS cannot carry")
        progress(f"{kernel.repo_id} -> {shown(kernel.distribution, 80)} {shown(kernel.version, 40)}: "
                 f"id {ORIGINS[str(kernel.repo_id_from)]}")
        mapped.append(f"{kernel.repo_id}={kernel.path}")
    return ":".join(mapped)
