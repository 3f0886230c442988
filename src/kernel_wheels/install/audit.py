"""The kernels installed in a Python, verified where they are (``kernel-wheels verify
--python PY``): each installed variant folder's bundle over its metadata.json and the
signed digests against the installed files, the record its wheel carried
(``<dist-info>/kernel_wheels.verified.json``) against what verifies now."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..checks.proof import ProofResult, proof_of
from ..errors import ProvenanceError
from ..provenance import VERIFIED_FILE, Policy, Verification, enforce, verify_variant_folder
from ..reading import read_json, read_text
from .installed import InstalledKernel, installed_kernels


def _record(kernel: InstalledKernel) -> Verification | None:
    """The record of the wheel that installed ``kernel``: the dist-info beside its
    package whose provenance names this variant folder."""
    site = kernel.path.parent.parent
    folder = f"{kernel.path.parent.name}/{kernel.path.name}"
    for dist_info in sorted(site.glob("*.dist-info")):
        try:
            record = read_json(dist_info / "kernel_wheels.json", "a record", ValueError)
            if not isinstance(record, dict) or record.get("variant_folder") != folder:
                continue
            return Verification.from_text(read_text(dist_info / VERIFIED_FILE, "a record", ValueError))
        except (OSError, ValueError):
            continue
    return None


def verify_installed(python: Path | None, policy: Policy) -> list[ProofResult]:
    """``kernel-wheels verify --python PY``: each installed kernel's provenance under
    ``policy``, where it is installed (``target``: its distribution)."""
    found = []
    for kernel in installed_kernels(python):
        recorded = _record(kernel)
        name = recorded.kernel if recorded else (kernel.repo_id or kernel.distribution)
        variant = recorded.variant if recorded else f"build/{kernel.variant}"
        try:
            now = verify_variant_folder(
                kernel.path, name, replace(policy, require_trusted_publisher=False), variant=variant,
                publisher=recorded.publisher if recorded else None,
                trusted=recorded.trusted_publisher if recorded else None)
        except ProvenanceError as exc:
            found.append(proof_of(kernel.distribution, kernel.path, (exc.message,), (), None))
            continue
        failures = recorded.differences(now) if recorded else []
        try:
            enforce(now, policy)
        except ProvenanceError as exc:
            failures.append(exc.message)
        found.append(proof_of(kernel.distribution, kernel.path, failures, (), now))
    return found
