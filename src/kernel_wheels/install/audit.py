"""The kernels installed in a Python, verified where they are (``kernel-wheels verify
--python PY``), each said in the words ``verify`` says a wheel with (checks/proof.py):

- every file its distribution's RECORD lists against that row's hash and size, and every
  file of the kernel's own package folder that RECORD does not list (:mod:`.intact`):
  an edited, missing or added file is a failure naming it, signed kernel or not;
- the code kernel-wheels wrote beside the variant folder (the loader, the import guard)
  derived again from the distribution's records and compared (RECORD can be rewritten
  with the file it lists; this cannot);
- the installed variant folder's bundle over its metadata.json and the signed digests
  against the installed files, and the record its wheel carried
  (``<dist-info>/kernel_wheels.verified.json``) against what verifies now.

Which distributions are kernel wheels, and where their dist-info folders are, the target
Python says (a probe, as ``local-kernels`` asks it); the files are read here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from ..checks.proof import ProofResult, proof_of
from ..confine import file_name, shown
from ..errors import EnvironmentProbeError, KernelWheelsError, ProvenanceError, UnsafeNameError
from ..provenance import VERIFIED_FILE, Policy, Verification, enforce, verify_variant_folder
from ..reading import read_json, read_regular, read_text
from .environment import run_probe_in_scratch, target_python
from .installed import InstalledKernel, installed_kernels
from .intact import changed_files

#: Where each distribution with a provenance record keeps its dist-info folder, and the
#: byte-code in its package that this Python would run instead of the source: a ``.pyc``
#: outside ``__pycache__`` (imported where no source is), or one in ``__pycache__`` for
#: this interpreter whose code is not what the source beside it compiles to (compiled
#: here, in the target Python, and compared as code objects: file names aside).
PROBE = r"""
import importlib.metadata as metadata, importlib.util, json, marshal, os, sys

def used(data, source, text):
    # Whether this Python's import would run the .pyc for its source, as importlib decides:
    # its magic number; a timestamp pyc when the source's mtime and size are the ones it
    # records; a hash pyc that checks its source when the source's hash is the one it
    # records, and always one that does not check.
    if data[:4] != importlib.util.MAGIC_NUMBER or len(data) < 16:
        return False
    flags = int.from_bytes(data[4:8], "little")
    if flags & 1:
        return not flags & 2 or data[8:16] == importlib.util.source_hash(text)
    stat = os.stat(source)
    return data[8:12] == (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") and \
        data[12:16] == (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")

def stale(folder):
    found = []
    for base, _dirs, files in os.walk(folder):
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(base, name)
            if os.path.basename(base) != "__pycache__":
                found.append([path, "sourceless"])
                continue
            stem, _, rest = name.partition(".")
            tag = rest.rsplit(".", 1)[0].split(".")
            if tag[0] != sys.implementation.cache_tag:
                continue
            source = os.path.join(os.path.dirname(base), stem + ".py")
            if not os.path.isfile(source):
                continue
            level = {"opt-1": 1, "opt-2": 2}.get(tag[1] if len(tag) > 1 else "", 0)
            try:
                with open(path, "rb") as stream:
                    data = stream.read(1 << 24)
                with open(source, "rb") as stream:
                    text = stream.read(1 << 24)
                if not used(data, source, text):
                    continue  # stale: Python compiles the source again instead
                ours = compile(text, source, "exec", dont_inherit=True, optimize=level)
                if marshal.loads(data[16:]) != ours:
                    found.append([path, "differs"])
            except Exception:
                found.append([path, "unreadable"])
    return found

found = []
for dist in metadata.distributions():
    try:
        text = dist.read_text("kernel_wheels.json")
        if not text:
            continue
        package = str(json.loads(text).get("variant_folder", "")).split("/")[0]
    except Exception:
        continue
    root = str(dist.locate_file(""))
    code = stale(os.path.join(root, package)) if package and package.isidentifier() else []
    found.append({"name": dist.metadata["Name"], "version": dist.version, "root": root,
                  "dist_info": str(getattr(dist, "_path", "")), "byte_code": code})
print(json.dumps(found))
"""


@dataclass(frozen=True)
class _Records:
    """What a kernel's dist-info says of it."""

    dist_info: Path
    provenance: dict[str, Any] | None
    metadata: str | None
    verified: Verification | None


#: What the probe says of a ``.pyc`` Python would run instead of its source.
_BYTE_CODE = {
    "sourceless": "is byte-code outside __pycache__, which Python imports where no source is "
                  "(no kernel wheel installs one)",
    "differs": "is byte-code that is not what the source beside it compiles to: Python would "
               "run it instead of the source",
    "unreadable": "is byte-code this Python cannot read or compare with its source",
}


def _dist_infos(python: Path | None,
                timeout: float = 120) -> dict[tuple[str, str, str], tuple[Path, tuple[str, ...]]]:
    """(name, version, site folder) -> (dist-info folder, what is wrong with the byte-code
    of its package), as the target Python finds them."""
    target = target_python(python)
    rows = run_probe_in_scratch(target, PROBE, "list what is installed in", timeout)
    if not isinstance(rows, list):
        raise EnvironmentProbeError(f"unexpected answer from the Python at {target}")
    found = {}
    for row in rows:
        if isinstance(row, dict) and all(isinstance(row.get(k), str) and row[k]
                                         for k in ("name", "version", "root", "dist_info")):
            root = Path(row["root"])
            answered = row.get("byte_code")
            code: list[Any] = answered if isinstance(answered, list) else []
            lines = tuple(f"{shown(_relative(root, str(path)), 200)} {_BYTE_CODE[why]}"
                          for path, why in (entry for entry in code if isinstance(entry, list)
                                            and len(entry) == 2 and entry[1] in _BYTE_CODE))
            found[(row["name"], row["version"], str(root))] = (Path(row["dist_info"]), lines)
    return found


def _relative(root: Path, path: str) -> str:
    found = Path(path)
    return found.relative_to(root).as_posix() if found.is_relative_to(root) else path


def _read_records(dist_info: Path) -> _Records:
    def read(name: str) -> str | None:
        try:
            return read_text(dist_info / name, "a record", ValueError)
        except (OSError, ValueError):
            return None

    try:
        provenance = read_json(dist_info / "kernel_wheels.json", "a record", ValueError)
    except (OSError, ValueError):
        provenance = None
    verified = read(VERIFIED_FILE)
    return _Records(dist_info, provenance if isinstance(provenance, dict) else None,
                    read("METADATA"), Verification.from_text(verified) if verified else None)


def _code(site: Path, records: _Records) -> tuple[list[tuple[str, str]], list[str]]:
    """The loader and the import guard derived again and compared: (failures, what is
    not derived: a distribution another kernel-wheels release made)."""
    from ..checks.contract import other_release
    from ..wheel.metadata import GENERATOR

    record = records.provenance or {}
    if record.get("generator") != GENERATOR:
        return [], [other_release(record.get("generator"))]
    try:
        members = _derived_code(record, records.metadata or "")
    except (KernelWheelsError, ValueError, TypeError, KeyError) as exc:
        reason = exc.message if isinstance(exc, KernelWheelsError) else \
            f"no {exc}" if isinstance(exc, KeyError) else str(exc)
        return [("", f"the files kernel-wheels wrote cannot be derived again from its records: "
                     f"{shown(reason, 200)}")], []
    failures = []
    for arcname, content in members:
        try:
            found = read_regular(site / arcname, "the installed file", ValueError, limit=1 << 20)
        except (OSError, ValueError):
            continue  # missing or unreadable: the RECORD comparison names it
        if found != content:
            failures.append((arcname, f"{arcname} differs from what kernel-wheels derives from "
                                      "its records (the code that runs on import)"))
    return failures, []


def _derived_code(record: dict[str, Any], metadata: str) -> list[tuple[str, bytes]]:
    """``(path, bytes)`` of the loader and (binary torch builds) the import guard, from
    the provenance record and METADATA's name and version, as to-wheel wrote them."""
    from packaging.version import Version

    from ..kernel.variants import parse_variant
    from ..wheel.guard import guard_member, needs_guard
    from ..wheel.loader import loader_member
    from ..wheel.plan import TagOptions, plan_wheel

    module, folder = str(record["variant_folder"]).split("/")
    variant = parse_variant(folder)
    guarded = needs_guard(variant)
    members = [loader_member(module, folder, str(record["layout"]), guarded)]
    if guarded:
        headers = HeaderParser().parsestr(metadata)
        kernel_name, name = str(record["kernel_name"]), headers.get("Name")
        label = record.get("variant_label")
        plan = plan_wheel(variant, kernel_name, Version(str(headers.get("Version"))).public,
                          TagOptions(), name if name != kernel_name else None,
                          label if isinstance(label, str) else None)
        if (guard := guard_member(variant, module, plan)) is not None:
            members.append(guard)
    return [(member.arcname, member.content or b"") for member in members]


def _installed_failures(site: Path, package: str, records: _Records) -> tuple[list[str], list[str]]:
    """What differs from what was installed (failures), and what is not derived again."""
    changes = changed_files(site, records.dist_info / "RECORD", package)
    derived, unproved = _code(site, records)
    named = {name for name, _ in changes}
    return [line for _, line in changes] + [line for name, line in derived if name not in named], \
        unproved


def _proof(kernel: InstalledKernel, records: _Records | None, policy: Policy,
           byte_code: tuple[str, ...] = ()) -> ProofResult:
    """One installed kernel: its files against what was installed (and its byte-code
    against its sources), its provenance under ``policy``."""
    unproved: list[str] = []
    if records is None:
        failures = [f"the Python does not say where {kernel.distribution}'s dist-info is: what "
                    "was installed cannot be compared"]
    else:
        failures, unproved = _installed_failures(kernel.path.parent.parent, kernel.path.parent.name,
                                                 records)
    failures += byte_code
    recorded = records.verified if records else None
    name = recorded.kernel if recorded else (kernel.repo_id or kernel.distribution)
    variant = recorded.variant if recorded else f"build/{kernel.variant}"
    try:
        now = verify_variant_folder(
            kernel.path, name, replace(policy, require_trusted_publisher=False), variant=variant,
            publisher=recorded.publisher if recorded else None,
            trusted=recorded.trusted_publisher if recorded else None)
    except ProvenanceError as exc:
        return proof_of(kernel.distribution, kernel.path, (*failures, exc.message), (), None)
    failures += recorded.differences(now) if recorded else []
    try:
        enforce(now, policy)
    except ProvenanceError as exc:
        failures.append(exc.message)
    return proof_of(kernel.distribution, kernel.path, failures, unproved, now)


def _unloadable(name: str, site: Path, records: _Records) -> ProofResult | None:
    """A kernel wheel's distribution whose variant folder ``kernels`` cannot load (its
    metadata.json is gone): what changed since it was installed (None: a distribution
    of kernel-wheels 0.1's layout, which has no variant folder)."""
    from ..wheel.derive import WHEEL_LAYOUT

    record = records.provenance or {}
    folder = record.get("variant_folder")
    if record.get("wheel_layout") != WHEEL_LAYOUT or not isinstance(folder, str):
        return None
    package = folder.split("/", 1)[0]
    try:
        file_name(package, f"{name}'s record")
    except UnsafeNameError as exc:
        return proof_of(name, site, (exc.message,), (), None)
    failures, _ = _installed_failures(site, package, records)
    return proof_of(name, site / folder, failures or [f"{shown(folder, 200)} is no variant folder "
                                                      "kernels can load"], (), None)


def verify_installed(python: Path | None, policy: Policy) -> list[ProofResult]:
    """``kernel-wheels verify --python PY``: each installed kernel's files against what was
    installed, and its provenance under ``policy``, where it is installed (``target``: its
    distribution), sorted by distribution; a kernel wheel's distribution whose variant
    folder is gone is a failure too."""
    kernels = {(k.distribution, k.version, str(k.path.parent.parent)): k for k in installed_kernels(python)}
    found = []
    for key, (dist_info, byte_code) in _dist_infos(python).items():
        records = _read_records(dist_info)
        kernel = kernels.pop(key, None)
        if kernel is not None:
            found.append(_proof(kernel, records, policy, byte_code))
        elif (broken := _unloadable(key[0], Path(key[2]), records)) is not None:
            found.append(broken)
    found += [_proof(kernel, None, policy) for kernel in kernels.values()]
    return sorted(found, key=lambda result: result.target)
