"""The provenance of the kernels installed in a Python, verified where they are
(``kernel-wheels verify --python PY``): each installed variant folder's bundle over its
metadata.json and the signed digests against the installed files, the record its wheel
carried (``<dist-info>/kernel_wheels.verified.json``) against what verifies now."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ..checks.provenance import ProvenanceResult
from ..errors import ProvenanceError
from ..provenance import VERIFIED_FILE, Policy, Verification, enforce, verify_variant_folder
from .installed import InstalledKernel, installed_kernels


def _record(kernel: InstalledKernel) -> Verification | None:
    """The record of the wheel that installed ``kernel``: the dist-info beside its
    package whose provenance names this variant folder."""
    site = kernel.path.parent.parent
    folder = f"{kernel.path.parent.name}/{kernel.path.name}"
    for dist_info in sorted(site.glob("*.dist-info")):
        try:
            record = json.loads((dist_info / "kernel_wheels.json").read_text("utf-8"))
            if not isinstance(record, dict) or record.get("variant_folder") != folder:
                continue
            return Verification.from_text((dist_info / VERIFIED_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            continue
    return None


def verify_installed(python: Path | None, policy: Policy) -> list[ProvenanceResult]:
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
            found.append(ProvenanceResult(kernel.distribution, kernel.path, (exc.message,), None))
            continue
        failures = recorded.differences(now) if recorded else []
        try:
            enforce(now, policy)
        except ProvenanceError as exc:
            failures.append(exc.message)
        found.append(ProvenanceResult(kernel.distribution, kernel.path, tuple(failures), now))
    return found


def verify_download(wheel: Path, policy: Policy) -> Verification | None:
    """A downloaded wheel's provenance, before anything installs it: refused (one line
    naming the wheel, the kernel, the variant and the reason) unless it verifies."""
    from ..checks.provenance import verify_wheel
    from ..checks.report import Status

    findings, now = verify_wheel(wheel, policy)
    failures = [f for f in findings if f.status is Status.FAIL]
    if failures:
        raise ProvenanceError(f"{wheel.name} was not installed: {failures[0].message}")
    return now
