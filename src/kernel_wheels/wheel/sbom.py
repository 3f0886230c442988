"""The software bill of materials every wheel carries (PEP 770): a CycloneDX 1.6 JSON
document at ``<dist-info>/sboms/kernel-wheels.cdx.json``.

It says what a security team asks of a kernel wheel: which kernel (repository URL,
commit, build variant, version), which files with which sha256, what the variant's
``metadata.json`` says about its backend and toolchain, which Python packages it needs,
and that kernel-wheels made it. The file digests come from the writer, which computed
them while packing (:class:`~kernel_wheels.wheel.writer.Member` ``derive``): no binary
is read twice. The bytes are reproducible: no clock, and the serial number is a UUID
derived from the wheel's name and contents, not a random one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .. import __version__

if TYPE_CHECKING:  # check reads an SBOM without the writer
    from .members import Member, WrittenMember

SBOM_NAME = "kernel-wheels.cdx.json"
SBOM_FOLDER = "sboms"
SPEC_VERSION = "1.6"
#: Property names are namespaced, as CycloneDX asks of tools.
PREFIX = "kernel-wheels:"
#: metadata.json keys the SBOM shows elsewhere (the files, the dependencies).
_SHOWN_ELSEWHERE = frozenset({"digest", "python-depends", "kernel-depends"})
_MAX_PROPERTY = 4096  # a hostile metadata.json gets no megabyte property


@dataclass(frozen=True)
class SbomFacts:
    """What the SBOM says beyond the files: all of it the same for everyone converting
    the same commit with the same options."""

    filename: str
    project: str
    version: str
    kernel_name: str
    kernel_version: str
    variant: str
    source_url: str | None
    commit: str | None
    release: str | None
    license: str | None
    requirements: tuple[str, ...]
    metadata_json: dict[str, Any]


def sbom_arcname(dist_info: str) -> str:
    return f"{dist_info}/{SBOM_FOLDER}/{SBOM_NAME}"


def sbom_member(dist_info: str, facts: SbomFacts) -> Member:
    """The SBOM as a member made from the members written before it."""
    from .members import Member

    return Member(sbom_arcname(dist_info),
                  derive=lambda written: sbom_bytes(facts, written))


def sbom_bytes(facts: SbomFacts, files: Sequence[WrittenMember]) -> bytes:
    document = sbom_document(facts, files)
    return (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def sbom_document(facts: SbomFacts, files: Sequence[WrittenMember]) -> dict[str, Any]:
    wheel_ref = f"wheel:{facts.filename}"
    dependencies = list(_dependencies(facts.requirements))
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": serial_number(facts.filename, files),
        "version": 1,
        "metadata": {
            "tools": {"components": [{
                "type": "application", "name": "kernel-wheels", "version": __version__,
                "bom-ref": "tool:kernel-wheels"}]},
            "component": {
                "type": "library", "bom-ref": wheel_ref, "name": facts.project,
                "version": facts.version,
                "purl": f"pkg:pypi/{canonicalize_name(facts.project)}@{quote(facts.version, safe='')}"
                        f"?file_name={quote(facts.filename, safe='')}",
                "properties": [{"name": PREFIX + "wheel", "value": facts.filename}],
            },
        },
        "components": [_kernel_component(facts, files), *dependencies],
        "dependencies": [{"ref": wheel_ref,
                          "dependsOn": ["kernel", *(d["bom-ref"] for d in dependencies)]}],
    }


def serial_number(filename: str, files: Sequence[WrittenMember]) -> str:
    """A UUID from the wheel's name and its members' digests: the same wheel always gets
    the same serial number, a different one another."""
    digest = hashlib.sha256(filename.encode())
    for member in files:
        digest.update(f"\n{member.arcname}\0{member.sha256.hex()}".encode())
    import uuid  # here: checking a wheel's SBOM never makes a serial number

    return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'kernel-wheels:' + digest.hexdigest())}"


def _kernel_component(facts: SbomFacts, files: Sequence[WrittenMember]) -> dict[str, Any]:
    properties = [
        {"name": PREFIX + "variant", "value": facts.variant},
        *({"name": PREFIX + key, "value": value}
          for key, value in (("commit", facts.commit), ("release", facts.release),
                             ("source", facts.source_url)) if value),
        *({"name": f"{PREFIX}metadata:{key}", "value": value}
          for key, value in metadata_facts(facts.metadata_json)),
    ]
    component: dict[str, Any] = {
        "type": "library", "bom-ref": "kernel", "name": facts.kernel_name,
        "version": facts.kernel_version, "properties": properties,
        "components": [_file_component(member) for member in files],
    }
    if facts.source_url:
        component["externalReferences"] = [{"type": "vcs", "url": facts.source_url}]
    if facts.license:
        component["licenses"] = [{"expression": facts.license}]
    return component


def _file_component(member: WrittenMember) -> dict[str, Any]:
    return {"type": "file", "bom-ref": f"file:{member.arcname}", "name": member.arcname,
            "hashes": [{"alg": "SHA-256", "content": member.sha256.hex()}],
            "properties": [{"name": PREFIX + "size", "value": str(member.size)}]}


def metadata_facts(raw: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """metadata.json's backend and toolchain facts as (dotted key, text) pairs, keys
    sorted; lists of plain values joined by commas, nested objects flattened."""
    for key in sorted(raw):
        if not prefix and key in _SHOWN_ELSEWHERE:
            continue
        value = raw[key]
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from metadata_facts(value, name + ".")
        elif isinstance(value, list) and all(_plain(v) for v in value):
            yield name, ",".join(_text(v) for v in value)[:_MAX_PROPERTY]
        elif _plain(value):
            yield name, _text(value)[:_MAX_PROPERTY]


def _plain(value: object) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _text(value: object) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _dependencies(requirements: Sequence[str]) -> Iterator[dict[str, Any]]:
    seen: set[str] = set()
    for text in requirements:
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement:
            continue  # METADATA validation names it
        if name in seen:
            continue
        seen.add(name)
        yield {"type": "library", "bom-ref": f"pypi:{name}", "name": name,
               "purl": f"pkg:pypi/{name}",
               "properties": [{"name": PREFIX + "requirement", "value": text}]}
