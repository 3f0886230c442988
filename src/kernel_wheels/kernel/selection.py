"""Choosing variants: glob patterns on names and filters on parsed fields."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from .. import data
from ..errors import SelectionError, UsageError, VariantError
from .variants import Variant, parse_variant


@dataclass(frozen=True)
class VariantFilter:
    patterns: tuple[str, ...] = ()  # globs on the variant name, any may match
    torch: tuple[str, ...] = ()  # "2.13"
    backends: tuple[str, ...] = ()  # "cuda", "cpu", or a tag such as "cu128"
    cpu_archs: tuple[str, ...] = ()
    oses: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Filter values are checked before anything is fetched: a typo must not look
        like a kernel with no such variant."""
        table = data.load("variants")
        backend_types = {spec["type"] for spec in table["backends"].values()}
        backend_types |= set(table["noarch_backends"]) | {"universal"}
        versioned = "|".join(k for k, spec in table["backends"].items() if "version_digits" in spec)
        for value in self.torch:
            if not re.fullmatch(r"\d+\.\d+", value):
                raise UsageError(f"--torch '{value}' is not a torch version like 2.7")
        for value in self.backends:
            if value not in backend_types and not re.fullmatch(rf"(?:{versioned})\d+", value):
                raise UsageError(f"--backend '{value}' is not a backend ({', '.join(sorted(backend_types))}) "
                                 "or a backend tag like cu128")
        for value in self.cpu_archs:
            if value not in table["cpu_archs"]:
                raise UsageError(f"--arch '{value}' is not one of {', '.join(table['cpu_archs'])}")
        for value in self.oses:
            if value not in table["operating_systems"]:
                raise UsageError(f"--os '{value}' is not one of {', '.join(table['operating_systems'])}")
        for value in self.patterns:
            if not value.strip():
                raise UsageError("--variant is empty")

    def matches(self, variant: Variant) -> bool:
        if self.patterns and not any(fnmatch.fnmatchcase(variant.name, p) for p in self.patterns):
            return False
        if self.torch and (variant.noarch or variant.framework_version_str not in self.torch):
            return False
        if self.backends and not ({variant.backend, variant.backend_tag} & set(self.backends)):
            return False
        if self.cpu_archs and variant.cpu_arch not in self.cpu_archs:
            return False
        return not (self.oses and variant.os not in self.oses)

    @property
    def empty(self) -> bool:
        return not (self.patterns or self.torch or self.backends or self.cpu_archs or self.oses)


@dataclass(frozen=True)
class Selection:
    selected: tuple[Variant, ...]
    not_variants: tuple[tuple[str, str], ...]  # (folder name, why)


def parse_folders(names: list[str]) -> tuple[list[Variant], list[tuple[str, str]]]:
    variants, skipped = [], []
    for name in names:
        try:
            variants.append(parse_variant(name))
        except VariantError as exc:
            skipped.append((name, exc.message))
    return variants, skipped


def select_variants(names: list[str], filters: VariantFilter, where: str) -> Selection:
    variants, skipped = parse_folders(names)
    chosen = tuple(v for v in variants if filters.matches(v))
    if not chosen:
        existing = ", ".join(v.name for v in variants) or "none"
        what = "the filters select no variant" if not filters.empty else "no build variants"
        why = ""
        if skipped and not variants:  # say why the folders that are there are not variants
            more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
            why = f" ({skipped[0][1]}{more})"
        raise SelectionError(f"{what} in {where}; variants that exist: {existing}{why}")
    return Selection(chosen, tuple(skipped))
