"""A kernel's build variants at a version (``kernel-wheels variants``): the folders under
``build/`` parsed into variants, those the filters keep, and the folders that are not
variants with the reason. Nothing is downloaded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..kernel.revision import Revision
from ..kernel.selection import VariantFilter, parse_folders
from ..kernel.variants import Variant
from ..kernel.versions import VersionRequest
from . import KernelSource


@dataclass(frozen=True)
class VariantList:
    """A kernel's variants at a pinned revision, as ``kernel-wheels variants`` lists them."""

    #: How messages refer to the source.
    source: str
    revision: Revision
    #: The variants the filters keep, in the source's order.
    variants: tuple[Variant, ...]
    #: (folder name, why it is not a variant)
    not_variants: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "revision": self.revision.to_dict(),
                "variants": [v.to_dict() for v in self.variants],
                "not_variants": [{"folder": n, "reason": r} for n, r in self.not_variants]}


def list_variants(source: KernelSource, request: VersionRequest | None = None,
                  filters: VariantFilter | None = None) -> VariantList:
    """The variants of ``source`` at ``request`` (None: the default branch, or the
    folder) that ``filters`` keep (None: all of them)."""
    chosen = filters or VariantFilter()
    revision = source.resolve(request)
    variants, skipped = parse_folders(source.variant_names(revision))
    return VariantList(source.display, revision, tuple(v for v in variants if chosen.matches(v)),
                       tuple(skipped))
