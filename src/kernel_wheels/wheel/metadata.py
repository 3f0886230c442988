"""The dist-info texts: METADATA (core metadata 2.4), WHEEL, and the provenance record."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from packaging.metadata import InvalidMetadata, Metadata

from .. import __version__
from ..confine import shown
from ..errors import MetadataError

if TYPE_CHECKING:  # checking METADATA needs no wheel plan
    from .plan import WheelPlan

PROVENANCE_FILE = "kernel_wheels.json"
GENERATOR = f"kernel-wheels {__version__}"


@dataclass(frozen=True)
class DescribedKernel:
    """What METADATA says beyond the plan."""

    summary: str
    description: str | None
    #: An SPDX expression (``License-Expression``).
    license: str | None
    requirements: tuple[str, ...]
    #: The exact source revision (``Project-URL: Source``).
    source_url: str | None
    #: A licence that is not an SPDX expression (the Hub's ``other``, ``llama2``...),
    #: written as ``License`` (core metadata keeps both fields for this).
    license_text: str | None = None
    #: Further ``Project-URL`` entries: (label, URL).
    project_urls: tuple[tuple[str, str], ...] = ()


def license_fields(value: str | None) -> tuple[str | None, str | None]:
    """A licence from kernel-builder (SPDX, or the Hub's own identifiers) or a card:
    ``(SPDX expression, None)`` when it is one (``apache-2.0`` -> ``Apache-2.0``), else
    ``(None, value)`` for the free-text ``License`` field (``other``)."""
    if not value:
        return None, None
    if not value.isprintable():
        raise MetadataError(f"the licence {shown(repr(value), 80)} has a control character in it; "
                            "it cannot go into METADATA")
    try:
        return str(canonicalize_license_expression(value)), None
    except InvalidLicenseExpression:
        return None, value


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
    elif kernel.license_text:
        fields.append(("License", kernel.license_text))
    fields.append(("Requires-Python", plan.requires_python))
    fields += [("Requires-Dist", r) for r in (plan.torch_requirement, *kernel.requirements)]
    if kernel.source_url:
        fields.append(("Project-URL", f"Source, {kernel.source_url}"))
    fields += [("Project-URL", f"{label}, {url}") for label, url in kernel.project_urls]
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
