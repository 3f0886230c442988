"""A shared object's dynamic symbols as pyelftools reads them: the tests' own view of the
builder's output, independent of the reader under test (``kernel_wheels.elf``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection


@dataclass(frozen=True)
class DynamicSymbols:
    defined: frozenset[str]
    #: (symbol, "GLIBCXX_3.4.29") for every undefined dynamic symbol with a version
    versioned_imports: tuple[tuple[str, str], ...]


def dynamic_symbols(path: Path) -> DynamicSymbols:
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        names: dict[int, str] = {}
        verneed = elf.get_section_by_name(".gnu.version_r")
        if isinstance(verneed, GNUVerNeedSection):
            for _library, auxiliaries in verneed.iter_versions():
                for aux in auxiliaries:
                    names[aux.entry.vna_other] = aux.name
        versym = elf.get_section_by_name(".gnu.version")
        dynsym: Any = elf.get_section_by_name(".dynsym")
        defined, imports = set(), []
        for index, symbol in enumerate(dynsym.iter_symbols() if dynsym is not None else ()):
            if not symbol.name:
                continue
            if symbol.entry.st_shndx != "SHN_UNDEF":
                defined.add(symbol.name)
            elif isinstance(versym, GNUVerSymSection):
                ndx = versym.get_symbol(index).entry["ndx"]
                if isinstance(ndx, int) and (ndx & 0x7FFF) in names:
                    imports.append((symbol.name, names[ndx & 0x7FFF]))
        return DynamicSymbols(frozenset(defined), tuple(imports))
