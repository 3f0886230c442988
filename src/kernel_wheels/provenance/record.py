"""What was verified about one variant, as a frozen dataclass, and the dist-info file
that carries it in the wheel: ``<dist-info>/kernel_wheels.verified.json`` (beside the
original bundle, which stays unchanged in the variant folder; docs/provenance.md).

The file holds facts only, no policy and no clock: the same release converted twice
gives the same bytes (unless the Hub changes its trusted-publisher flag in between).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from ..kernel.build_provenance import read_build_provenance
from ..reading import parse_json

VERIFIED_FILE = "kernel_wheels.verified.json"
#: The shape of the file; readers refuse another.
FORMAT = 1
#: What a record must agree on with the same files verified again.
_COMPARED = ("signed", "identity", "issuer", "log_index", "log_time", "metadata_sha256",
             "bundle_sha256")


@dataclass(frozen=True)
class BuildFacts:
    """metadata.json's ``provenance`` (kernel-builder writes it; the ``kernels`` library
    reads it the same way): the kernel source's commit, the builder's version, and
    whether either git tree had uncommitted changes."""

    kernel_commit: str | None = None
    builder_version: str | None = None
    builder_commit: str | None = None
    #: True: built from a dirty tree; False: both clean; None: metadata.json does not say.
    dirty: bool | None = None

    @classmethod
    def from_metadata(cls, raw: dict[str, Any], where: str = "metadata.json") -> BuildFacts:
        """Read as kernels reads it (kernel/build_provenance.py: the legacy ``sha`` as
        ``commit``); raises MetadataError where kernels would refuse it."""
        found = read_build_provenance(raw.get("provenance"), where)
        if found is None:
            return cls()
        return cls(kernel_commit=found.kernel.commit if found.kernel else None,
                   builder_version=found.builder_version[:200] or None,
                   builder_commit=found.builder.commit if found.builder else None,
                   dirty=found.dirty)


@dataclass(frozen=True)
class Verification:
    """One variant's provenance as verified: signed or not, by whom, logged where and
    when, its publisher and whether the Hub trusts it, and its build facts."""

    kernel: str
    variant: str
    signed: bool
    identity: str | None = None
    issuer: str | None = None
    log_index: int | None = None
    #: The transparency log's integrated time (seconds since the epoch, UTC).
    log_time: int | None = None
    trust_root: str | None = None
    #: sha256 (hex) of metadata.json and of its bundle, as verified.
    metadata_sha256: str | None = None
    bundle_sha256: str | None = None
    #: The files of the variant its signed digest covers (all of them, when signed).
    files_verified: int = 0
    publisher: str | None = None
    #: The Hub's ``trustedKernelPublisher`` flag for the publisher; None: not asked
    #: (a local folder, a git repository) or not known.
    trusted_publisher: bool | None = None
    build: BuildFacts = BuildFacts()

    @property
    def status(self) -> str:
        return "signed" if self.signed else "unsigned"

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["format"] = FORMAT
        record["status"] = self.status
        return record

    def text(self) -> str:
        """The dist-info file's bytes (as text): sorted keys, one fixed layout."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def summary(self) -> dict[str, Any]:
        """The index pages' per-file summary (docs/provenance.md)."""
        return {"status": self.status, "identity": self.identity, "issuer": self.issuer,
                "log_index": self.log_index, "trusted_publisher": self.trusted_publisher,
                "dirty": self.build.dirty}

    def differences(self, now: Verification) -> list[str]:
        """Where this (recorded) verification says something other than ``now`` (the
        same files verified again): what a record that lies, or a wheel changed after
        it was made, gives."""
        return [f"{VERIFIED_FILE} says {key} {getattr(self, key)!r}, but the wheel verifies as "
                f"{getattr(now, key)!r}" for key in _COMPARED if getattr(self, key) != getattr(now, key)]

    def one_line(self) -> str:
        if not self.signed:
            return f"{self.kernel} {self.variant}: unsigned (no metadata.json.sigstore)"
        return (f"{self.kernel} {self.variant}: signed by {self.identity} ({self.issuer}), "
                f"transparency log entry {self.log_index}")

    @classmethod
    def from_text(cls, text: str) -> Verification | None:
        """The record read back from a wheel; None if it is not one of ours."""
        try:
            raw = parse_json(text)
        except ValueError:
            return None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            return None
        build = raw.get("build")
        try:
            return cls(
                kernel=str(raw["kernel"]), variant=str(raw["variant"]), signed=bool(raw["signed"]),
                identity=raw.get("identity"), issuer=raw.get("issuer"),
                log_index=raw.get("log_index"), log_time=raw.get("log_time"),
                trust_root=raw.get("trust_root"), metadata_sha256=raw.get("metadata_sha256"),
                bundle_sha256=raw.get("bundle_sha256"), files_verified=int(raw.get("files_verified") or 0),
                publisher=raw.get("publisher"), trusted_publisher=raw.get("trusted_publisher"),
                build=BuildFacts(**build) if isinstance(build, dict) else BuildFacts())
        except (KeyError, TypeError, ValueError):
            return None
