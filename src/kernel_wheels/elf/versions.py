"""Symbol versions: the version needs (.gnu.version_r), definitions (.gnu.version_d) and
the per-symbol version indexes (.gnu.version), walked the way the loader walks them.

glibc's ``_dl_check_map_versions`` follows ``vn_next``/``vna_next`` (not the counts),
refuses a record version other than 1, *asserts* that each needed file is a loaded
dependency, matches each needed version by hash and name, and sizes its version array by
the highest index it saw: a symbol whose index lies beyond it is read out of bounds. The
reader walks the same chains (each link forward, inside the section, bounded by its size),
requires counts, hashes, names and indexes to agree, and every symbol's index to be one
the chains define.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dynamic import DT_RELR, Dynamic
from .layout import SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM, Layout, Section
from .symbols import SHN_UNDEF, Row, words_of

VER_NDX_GLOBAL = 1
VER_FLG_BASE = 0x1


def elf_hash(name: bytes) -> int:
    """The System V ELF hash, which version records carry for their names."""
    value = 0
    for byte in name:
        value = ((value << 4) + byte) & 0xFFFFFFFF
        high = value & 0xF0000000
        if high:
            value ^= high >> 24
        value &= ~high & 0xFFFFFFFF
    return value


@dataclass(frozen=True)
class Versions:
    #: {library soname: {"GLIBC_2.14", ...}} from the version needs.
    needs: dict[str, frozenset[str]]
    #: version index -> version name, for the needed versions.
    needed_names: dict[int, str]
    #: version indexes the definitions give.
    defined: frozenset[int]
    #: the version index of every dynamic symbol (empty without .gnu.version).
    symbol_indexes: list[int]


def read_versions(layout: Layout, dynamic: Dynamic, dynsym_rows: list[Row]) -> Versions:
    needs, names = _version_needs(layout, dynamic)
    defined = _version_definitions(layout, dynamic, set(names))
    if DT_RELR in dynamic.values and needs and any(n.startswith("libc.so.") for n in dynamic.needed) \
            and not any("GLIBC_ABI_DT_RELR" in versions for versions in needs.values()):
        layout.fail("DT_RELR without a GLIBC_ABI_DT_RELR version need: the loader refuses it")
    indexes = _symbol_indexes(layout, dynsym_rows, set(names), defined)
    return Versions({lib: frozenset(v) for lib, v in needs.items()}, names, frozenset(defined), indexes)


def _records(layout: Layout, section: Section, fmt: str, size: int, start: int,
             next_field: int, what: str) -> list[tuple[int, tuple[int, ...]]]:
    """(offset, fields) of each record of a chain starting at ``start`` inside ``section``:
    each link goes forward by at least one record, so the walk ends within the section."""
    records = []
    offset = start
    for _ in range(section.size // size + 1):
        if offset % 4 or offset + size > section.size:
            layout.fail(f"{what} at offset {offset:#x} lies outside its section "
                        f"{section.name or section.index}")
        fields = layout.unpack(fmt, section.offset + offset)
        records.append((offset, fields))
        step = fields[next_field]
        if step == 0:
            return records
        if step < size:
            layout.fail(f"{what} at offset {offset:#x} links back into itself")
        offset += step
    layout.fail(f"{what} chain does not end inside its section")


def _version_string(layout: Layout, dynamic: Dynamic, section: Section, offset: int) -> str:
    if dynamic.strtab is None or section.link != dynamic.strtab.index:
        layout.fail(f"section {section.name or section.index} does not use the dynamic string table")
    strings = dynamic.strings
    end = strings.find(b"\0", offset)
    if offset >= len(strings) or end <= offset:
        layout.fail(f"a version name at {offset:#x} is outside the dynamic string table or empty")
    text = strings[offset:end].decode("utf-8", "replace")
    if not text.isprintable():
        layout.fail(f"a version name holds control characters ({text!r})")
    return text


def _version_needs(layout: Layout, dynamic: Dynamic) -> tuple[dict[str, set[str]], dict[int, str]]:
    section = layout.first(SHT_GNU_VERNEED)
    if section is None:
        return {}, {}
    needs: dict[str, set[str]] = {}
    names: dict[int, str] = {}
    entries = _records(layout, section, "HHIII", 16, 0, 4, "a version need")
    if len(entries) != section.info:
        layout.fail(f"{len(entries)} version needs, but its section counts {section.info}")
    for offset, (version, count, file_offset, aux, _next) in entries:
        if version != 1:
            layout.fail(f"version need record version {version} (the loader accepts only 1)")
        library = _version_string(layout, dynamic, section, file_offset)
        if library not in dynamic.needed:
            layout.fail(f"it needs versions of {library!r}, which is not a DT_NEEDED library "
                        "(the loader stops on an assertion)")
        auxiliaries = _records(layout, section, "IHHII", 16, offset + aux, 4, "a needed version")
        if len(auxiliaries) != count:
            layout.fail(f"{library} lists {len(auxiliaries)} needed versions but counts {count}")
        for _aux_offset, (vna_hash, _flags, other, vna_name, _vna_next) in auxiliaries:
            name = _version_string(layout, dynamic, section, vna_name)
            if vna_hash != elf_hash(name.encode()):
                layout.fail(f"needed version {name} of {library} carries the hash of another name "
                            "(the loader matches versions by hash)")
            index = other & 0x7FFF
            if index <= VER_NDX_GLOBAL or index in names:
                layout.fail(f"needed version {name} has index {index}, which is reserved or taken")
            names[index] = name
            needs.setdefault(library, set()).add(name)
    return needs, names


def _version_definitions(layout: Layout, dynamic: Dynamic, taken: set[int]) -> set[int]:
    section = layout.first(SHT_GNU_VERDEF)
    if section is None:
        return set()
    defined: set[int] = set()
    entries = _records(layout, section, "HHHHIII", 20, 0, 6, "a version definition")
    if len(entries) != section.info:
        layout.fail(f"{len(entries)} version definitions, but its section counts {section.info}")
    for offset, (version, _flags, index, count, vd_hash, aux, _next) in entries:
        if version != 1:
            layout.fail(f"version definition record version {version} (the loader accepts only 1)")
        auxiliaries = _records(layout, section, "II", 8, offset + aux, 1, "a version name")
        if count == 0 or len(auxiliaries) != count:
            layout.fail(f"a version definition lists {len(auxiliaries)} names but counts {count}")
        name = _version_string(layout, dynamic, section, auxiliaries[0][1][0])
        if vd_hash != elf_hash(name.encode()):
            layout.fail(f"defined version {name} carries the hash of another name")
        index &= 0x7FFF
        if index == 0 or index in defined or index in taken:
            layout.fail(f"defined version {name} has index {index}, which is reserved or taken")
        defined.add(index)
    return defined


def _symbol_indexes(layout: Layout, rows: list[Row], needed: set[int], defined: set[int]) -> list[int]:
    section = layout.first(SHT_GNU_VERSYM)
    if section is None:
        return []
    if section.entsize != 2 or section.size != 2 * len(rows):
        layout.fail(f"its symbol version table has {section.size} bytes for {len(rows)} dynamic "
                    "symbols (the loader reads one 2-byte index per symbol)")
    indexes = [i & 0x7FFF for i in words_of(layout, layout.section_bytes(section), "H")]
    known = {0, VER_NDX_GLOBAL} | needed | defined
    unknown = set(indexes) - known
    if unknown:
        layout.fail(f"a dynamic symbol has version index {min(unknown)}, which no version record "
                    "defines (the loader would read past its version table)")
    for _name, _bind, _type, shndx, position in rows[1:]:
        index = indexes[position]
        if index > VER_NDX_GLOBAL and (index in needed) != (shndx == SHN_UNDEF):
            kind = "undefined" if shndx == SHN_UNDEF else "defined"
            layout.fail(f"{kind} dynamic symbol {position} has version index {index}, which is "
                        f"{'defined here' if kind == 'undefined' else 'needed from another library'}")
    return indexes
