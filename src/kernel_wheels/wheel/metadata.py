"""The dist-info texts: METADATA (core metadata 2.4), WHEEL, and the provenance record."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from packaging.metadata import InvalidMetadata, Metadata

from .. import __version__
from ..errors import MetadataError
from .plan import WheelPlan

PROVENANCE_FILE = "kernel_wheels.json"
GENERATOR = f"kernel-wheels {__version__}"


@dataclass(frozen=True)
class DescribedKernel:
    """What METADATA says beyond the plan."""

    summary: str
    description: str | None
    license: str | None
    requirements: tuple[str, ...]
    source_url: str | None


def normalise_license(value: str | None, warn: Callable[[str], None]) -> str | None:
    """An SPDX expression from kernel-builder or Hub spellings (``apache-2.0``);
    unknown ones (``other``) are left out with a warning."""
    if not value:
        return None
    try:
        return str(canonicalize_license_expression(value))
    except InvalidLicenseExpression:
        warn(f"licence '{value}' is not an SPDX expression; License-Expression left out")
        return None


def card_license(card: str | None) -> str | None:
    """``license:`` from a Hub card's YAML front matter."""
    if not card or not card.startswith("---"):
        return None
    front = card.split("---", 2)[1] if card.count("---") >= 2 else ""
    match = re.search(r"^license:\s*['\"]?([^'\"\n]+)", front, re.MULTILINE)
    return match[1].strip() if match else None


def card_body(card: str | None) -> str | None:
    """The card without its YAML front matter (which would render as a table rule)."""
    if not card:
        return None
    if card.startswith("---") and card.count("---") >= 2:
        card = card.split("---", 2)[2]
    card = card.strip()
    return card + "\n" if card else None


def metadata_text(plan: WheelPlan, kernel: DescribedKernel) -> str:
    fields: list[tuple[str, str]] = [
        ("Metadata-Version", "2.4"),
        ("Name", plan.project_name),
        ("Version", plan.version),
        ("Summary", kernel.summary),
    ]
    if kernel.license:
        fields.append(("License-Expression", kernel.license))
    fields.append(("Requires-Python", plan.requires_python))
    fields += [("Requires-Dist", r) for r in (plan.torch_requirement, *kernel.requirements)]
    if kernel.source_url:
        fields.append(("Project-URL", f"Source, {kernel.source_url}"))
    if kernel.description:
        fields.append(("Description-Content-Type", "text/markdown"))
    text = "".join(f"{key}: {value}\n" for key, value in fields)
    if kernel.description:
        text += "\n" + kernel.description
    validate_metadata(text)
    return text


def validate_metadata(text: str) -> Metadata:
    """Parse and validate METADATA with ``packaging``; raise MetadataError if invalid."""
    try:
        return Metadata.from_email(text, validate=True)
    except (InvalidMetadata, ExceptionGroup) as exc:  # from_email raises a group of all problems
        details = "; ".join(str(e) for e in getattr(exc, "exceptions", [exc]))
        raise MetadataError(f"invalid METADATA: {details}") from None


def wheel_text(plan: WheelPlan) -> str:
    lines = [
        "Wheel-Version: 1.0",
        f"Generator: {GENERATOR}",
        f"Root-Is-Purelib: {'true' if plan.root_is_purelib else 'false'}",
        *(f"Tag: {tag}" for tag in plan.tags),
    ]
    return "\n".join(lines) + "\n"


def provenance_text(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=2, sort_keys=True) + "\n"
