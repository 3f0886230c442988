"""Choosing variants: glob patterns on names and filters on parsed fields."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from .errors import SelectionError, VariantError
from .variants import Variant, parse_variant


@dataclass(frozen=True)
class VariantFilter:
    patterns: tuple[str, ...] = ()  # globs on the variant name, any may match
    torch: tuple[str, ...] = ()  # "2.13"
    backends: tuple[str, ...] = ()  # "cuda", "cpu", or a tag such as "cu128"
    cpu_archs: tuple[str, ...] = ()
    oses: tuple[str, ...] = ()

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
        raise SelectionError(f"{what} in {where}; variants that exist: {existing}")
    return Selection(chosen, tuple(skipped))
