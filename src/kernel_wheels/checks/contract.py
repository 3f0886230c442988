"""The closed wheel contract: every member of a kernel wheel is a file of the kernel's
build or a file kernel-wheels derives from those files and the recorded conversion, and
is exactly that.

The variant folder's files are held to its metadata.json digest (:mod:`.digests`; for a
signed build, the publisher's signature covers that digest: :mod:`.signature`). Every
other member is made again here, by the same function ``to-wheel`` wrote it with
(:func:`kernel_wheels.wheel.derive.derived_members`), from the wheel's own folder and
what the wheel records of its conversion, and compared byte for byte: the loader and the
import guard (code ``import <module>`` runs), METADATA, WHEEL, the provenance and
verified records, the GPU record, the variant file, the SBOM and RECORD. Any member that
is neither (byte-code, an extra module, a file no digest covers) fails, named.

What the wheel records and nobody signs (docs/wheel-contract.md, "A closed contract"):
the source URL, commit, commit time and release of the conversion, the kernel's name
where metadata.json gives none, the Hub repository id and where it came from, the
distribution name and tags (the file name), the card's text and licence (METADATA's body
and licence field), and the Hub's trusted-publisher answer and the trust root's name (the
verified record). They are data, never code: each one only fills a field of a derived
file, whose bytes are then compared.

A wheel made by another kernel-wheels release is not re-derived (another release may
derive other bytes): it is reported in one line, ``not verified``, and a policy that
requires a signature refuses it (its own files are then covered by nothing).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from email.parser import HeaderParser
from typing import Any

from packaging.utils import InvalidWheelFilename
from packaging.version import InvalidVersion, Version

from ..confine import shown
from ..errors import KernelWheelsError
from ..kernel.metadata import KernelMetadata, parse_kernel_metadata
from ..kernel.revision import Revision
from ..kernel.variants import Variant, try_parse_variant
from ..provenance.record import VERIFIED_FILE, Verification
from ..reading import parse_json
from ..wheel.derive import Conversion, derived_members, describe, has_gpu_record, provenance_record
from ..wheel.gpu_record import record_bytes
from ..wheel.members import Member, WrittenMember, record_text, writing_order
from ..wheel.metadata import GENERATOR, PROVENANCE_FILE
from ..wheel.plan import WheelPlan, plan_wheel, tag_options_of
from ..wheel.variant_label import VariantWheel, sm_arch_of_code, split_variant_label, variant_wheel
from .contents import parse_filename
from .facts import WheelContents
from .report import Finding, Status

CHECK = "contract"


@dataclass(frozen=True)
class Derived:
    """What kernel-wheels derives for a wheel: each member's bytes by name (RECORD too)."""

    members: dict[str, bytes]
    plan: WheelPlan


class NotDerivable(Exception):
    """The wheel's records do not say enough (or say it wrongly) to derive its files."""


def is_byte_code(arcname: str) -> bool:
    return "__pycache__" in arcname.split("/") or arcname.endswith((".pyc", ".pyo"))


def check_contract(facts: WheelContents, gpu_binaries: tuple[tuple[str, Any], ...] | None,
                   verification: Verification | None) -> list[Finding]:
    """``gpu_binaries``: each binary's device code as the checks read it (``WheelGpuCode
    .binaries``); ``verification``: the wheel's provenance as verified now (None when it
    did not verify: that failure is the signature check's to report)."""
    findings = [Finding(CHECK, Status.FAIL, _byte_code(name)) for name in facts.members
                if is_byte_code(name)]
    record = facts.provenance
    if record is None:
        return findings or [Finding(CHECK, Status.NOT_VERIFIED,
                                    f"no {PROVENANCE_FILE}: not a wheel kernel-wheels made, so no "
                                    "file of it is re-derived")]
    generator = record.get("generator")
    if generator != GENERATOR:
        return findings + [Finding(CHECK, Status.NOT_VERIFIED, other_release(generator))]
    try:
        derived = derive(facts, record, gpu_binaries, verification)
    except NotDerivable as exc:
        return findings + [Finding(CHECK, Status.FAIL, f"the wheel's own files cannot be derived "
                                                       f"again: {exc}")]
    except KernelWheelsError as exc:  # a recorded value no derived file can hold
        return findings + [Finding(CHECK, Status.FAIL, f"the wheel's own files cannot be derived "
                                                       f"again: {exc.message}")]
    if derived.plan.filename != _without_build_tag(facts.filename):
        findings.append(Finding(CHECK, Status.FAIL, f"the file name is not the one kernel-wheels "
                                                    f"gives this build ({shown(derived.plan.filename)})"))
    folder = str(record["variant_folder"]) + "/"
    for name in facts.members:
        if name.startswith(folder) or is_byte_code(name):
            continue  # the folder's files: held to its digest (checks/digests.py)
        want = derived.members.get(name)
        if want is None:
            findings.append(Finding(CHECK, Status.FAIL, f"{shown(name, 200)} is neither a file of "
                                                        "the kernel's build nor one kernel-wheels "
                                                        "writes"))
        elif _sha256(facts, name) != hashlib.sha256(want).digest():
            findings.append(Finding(CHECK, Status.FAIL, f"{shown(name, 200)} differs from what "
                                                        "kernel-wheels derives from the kernel's "
                                                        "files and the recorded conversion"))
    for name in sorted(set(derived.members) - set(facts.members)):
        findings.append(Finding(CHECK, Status.FAIL, f"{name} is missing (kernel-wheels writes it)"))
    if not findings:
        findings.append(Finding(CHECK, Status.PASS, f"all {len(derived.members)} files kernel-wheels "
                                                    "wrote are what it derives from the kernel's "
                                                    "files and the recorded conversion"))
    return findings


def _without_build_tag(filename: str) -> str:
    """The file name without a build tag (PEP 427's rebuild number, ``name-1.0-1-...``):
    kernel-wheels writes none, but a build tag changes no member, only which of two
    otherwise equal files an installer prefers, so a copy renamed with one is the same
    wheel."""
    parts = filename.split("-")
    if len(parts) == 6 and parts[2][:1].isdigit():
        return "-".join(parts[:2] + parts[3:])
    return filename


def other_release(generator: object) -> str:
    made_by = shown(str(generator), 80) if isinstance(generator, str) else "an unknown tool"
    return (f"made by {made_by}, not by this release ({GENERATOR}): the files it wrote are not "
            "re-derived (convert the kernel again with this release)")


def _byte_code(name: str) -> str:
    return (f"{shown(name, 200)} is byte-code, which no kernel wheel carries (to-wheel leaves "
            "caches out): Python would run it instead of the source beside it")


def _sha256(facts: WheelContents, name: str) -> bytes | None:
    if name == f"{facts.dist_info}/RECORD":
        return facts.record_sha256
    return facts.hashes.get(name)


def derive(facts: WheelContents, record: dict[str, Any],
           gpu_binaries: tuple[tuple[str, Any], ...] | None,
           verification: Verification | None) -> Derived:
    """Every member kernel-wheels writes for this wheel, from its folder and records."""
    conversion, plan = _conversion(facts, record, gpu_binaries, verification)
    gpu_record = None
    if has_gpu_record(conversion.variant):
        binaries = gpu_binaries or ()
        gpu_record = lambda: record_bytes(binaries)  # noqa: E731
    own = derived_members(conversion, plan, gpu_record)
    folder = str(record["variant_folder"]) + "/"
    packed = [Member(name) for name in facts.members if name.startswith(folder)]
    known = {name: (facts.hashes[name], facts.sizes[name]) for name in facts.hashes
             if name.startswith(folder)}
    written: list[WrittenMember] = []
    derived: dict[str, bytes] = {}
    for member in writing_order([*packed, *own], plan.dist_info):
        if member.arcname in known:
            digest, size = known[member.arcname]
            written.append(WrittenMember(member.arcname, digest, size))
            continue
        content = member.derive(tuple(written)) if member.derive is not None else member.content or b""
        derived[member.arcname] = content
        written.append(WrittenMember(member.arcname, hashlib.sha256(content).digest(), len(content)))
    derived[f"{plan.dist_info}/RECORD"] = record_text(written, plan.dist_info).encode()
    return Derived(derived, plan)


def _conversion(facts: WheelContents, record: dict[str, Any],
                gpu_binaries: tuple[tuple[str, Any], ...] | None,
                verification: Verification | None) -> tuple[Conversion, WheelPlan]:
    folder = record.get("variant_folder")
    if not isinstance(folder, str) or folder.count("/") != 1:
        raise NotDerivable(f"{PROVENANCE_FILE} names no variant folder")
    module, folder_name = folder.split("/")
    variant = try_parse_variant(folder_name)
    if variant is None:
        raise NotDerivable(f"{shown(folder_name, 80)} is not a variant name")
    meta = _metadata(facts, folder)
    kernel_name = record.get("kernel_name")
    if not isinstance(kernel_name, str) or not kernel_name:
        raise NotDerivable(f"{PROVENANCE_FILE} names no kernel")
    layout = _layout(facts, folder, module)
    revision = _revision(record)
    repo_id, repo_id_from = record.get("repo_id"), record.get("repo_id_from")
    if (repo_id is not None and not isinstance(repo_id, str)) or \
            (repo_id_from is not None and not isinstance(repo_id_from, str)):
        raise NotDerivable(f"{PROVENANCE_FILE}'s repo_id is not text")
    planned = provenance_record(revision, variant, layout, module, folder_name, meta, kernel_name,
                                repo_id, repo_id_from)
    planned["generator"] = record.get("generator")
    _name, version, wheel_tags = parse_filename(facts.filename)
    metadata = _metadata_fields(facts)
    try:
        kernel_version = str(Version(version).public)
    except InvalidVersion as exc:
        raise NotDerivable(str(exc)) from None
    # A variant wheel's label is derived too (from the build and its binaries), never read.
    found_variant_wheel = _variant_wheel(variant, meta, split_variant_label(facts.filename)[1],
                                         gpu_binaries)
    label = found_variant_wheel.label if found_variant_wheel else None
    try:
        tags = tag_options_of(variant, wheel_tags)
        dist_name = metadata.get("Name") if metadata.get("Name") != kernel_name else None
        plan = plan_wheel(variant, kernel_name, kernel_version, tags, dist_name, label)
        described = replace(describe(kernel_name, variant, meta, None, revision.url,
                                     card_licence=metadata.get("licence")),
                            description=metadata.get("body"))
    except (KernelWheelsError, InvalidWheelFilename, InvalidVersion) as exc:
        raise NotDerivable(str(exc)) from None
    recorded = Verification.from_text(facts.texts[VERIFIED_FILE]) \
        if VERIFIED_FILE in facts.texts else None
    verified = None
    if verification is not None:
        # What the record says and no signature could (the Hub's answer, the root's name).
        verified = replace(verification, trust_root=recorded.trust_root if recorded else None)
    elif recorded is not None:
        verified = recorded  # its provenance failed: that check says why
    conversion = Conversion(variant, kernel_name, kernel_version, module, described, planned,
                            found_variant_wheel, verified)
    return conversion, plan


def _metadata(facts: WheelContents, folder: str) -> KernelMetadata:
    raw = facts.signed.get(f"{folder}/metadata.json")
    if raw is None:
        return KernelMetadata()
    try:
        document = parse_json(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise NotDerivable("its metadata.json is not JSON") from None
    if not isinstance(document, dict):
        raise NotDerivable("its metadata.json is not a JSON object")
    try:
        return parse_kernel_metadata(document, f"{folder}/metadata.json")
    except KernelWheelsError as exc:
        raise NotDerivable(exc.message) from None


def _layout(facts: WheelContents, folder: str, module: str) -> str:
    members = set(facts.members)
    if f"{folder}/__init__.py" in members:
        return "flat"
    if f"{folder}/{module}/__init__.py" in members:
        return "legacy"
    raise NotDerivable(f"{shown(folder, 200)} holds no Python package")


def _revision(record: dict[str, Any]) -> Revision:
    values = {key: record.get(key) for key in ("source", "commit", "release")}
    if not all(value is None or isinstance(value, str) for value in values.values()):
        raise NotDerivable(f"{PROVENANCE_FILE}'s source, commit or release is not text")
    commit_time = record.get("commit_time")
    if commit_time is not None and (not isinstance(commit_time, int) or isinstance(commit_time, bool)):
        raise NotDerivable(f"{PROVENANCE_FILE}'s commit_time is not a whole number")
    return Revision(requested="", ref=None, commit=values["commit"], commit_time=commit_time,
                    source_url=values["source"], release=values["release"])


def _metadata_fields(facts: WheelContents) -> dict[str, str | None]:
    """What METADATA records that the kernel's files do not say: the distribution name,
    the card's body and the card's licence."""
    text = facts.texts.get("METADATA")
    if text is None:
        raise NotDerivable("it has no METADATA")
    headers = HeaderParser().parsestr(text)
    _, blank, body = text.partition("\n\n")
    return {"Name": headers.get("Name"),
            "licence": headers.get("License-Expression") or headers.get("License"),
            "body": body if blank and body else None}


def _variant_wheel(variant: Variant, meta: KernelMetadata, label: str | None,
                   gpu_binaries: tuple[tuple[str, Any], ...] | None) -> VariantWheel | None:
    """A variant wheel's label and properties, as to-wheel --variants gives them: a CUDA
    build's GPU architectures from its binaries, else metadata.json's."""
    if label is None:
        return None
    archs = meta.archs if (meta.backend or variant.backend) == "cuda" else ()
    found = variant_wheel(variant, archs)
    if variant.backend == "cuda" and not variant.noarch:
        from ..kernel.gpu_archs import GpuCode

        code = GpuCode()
        for _, held in gpu_binaries or ():
            code = code.union(held)
        from_code = variant_wheel(variant, (), sm_arch_of_code(code.cubins, code.ptx))
        if isinstance(from_code, VariantWheel):
            found = from_code
    if not isinstance(found, VariantWheel):
        raise NotDerivable(f"the build has no variant wheel ({found.reason})")
    return found
