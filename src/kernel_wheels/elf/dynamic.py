"""The dynamic entries of an ELF shared object, read where the loader reads them.

The loader finds its tables through PT_DYNAMIC's entries (``elf_get_dynamic_info``): it
walks them until DT_NULL without a bound, keeps the last of each tag, ignores tags it
does not know, and dereferences the addresses they hold. A missing DT_RELAENT next to a
DT_RELA, or a DT_PLTREL that is neither DT_REL nor DT_RELA, stops it on an assertion;
DF_1_NOOPEN and DF_1_PIE make dlopen refuse the file. The reader reads the same entries
and refuses that, and holds every table they point to to the section that describes it
(same address, same size), so that what the checks read from the sections is what the
loader uses. String entries (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH) must lie inside
DT_STRSZ and name something printable.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .layout import (
    PF_W,
    PF_X,
    PT_DYNAMIC,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_FINI_ARRAY,
    SHT_GNU_HASH,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_HASH,
    SHT_INIT_ARRAY,
    SHT_PREINIT_ARRAY,
    SHT_REL,
    SHT_RELA,
    SHT_RELR,
    Layout,
    Section,
)
from .symbols import words_of

DT_NULL, DT_NEEDED, DT_PLTRELSZ, DT_PLTGOT, DT_HASH, DT_STRTAB, DT_SYMTAB = 0, 1, 2, 3, 4, 5, 6
DT_RELA, DT_RELASZ, DT_RELAENT, DT_STRSZ, DT_SYMENT, DT_INIT, DT_FINI = 7, 8, 9, 10, 11, 12, 13
DT_SONAME, DT_RPATH, DT_SYMBOLIC, DT_REL, DT_RELSZ, DT_RELENT, DT_PLTREL = 14, 15, 16, 17, 18, 19, 20
DT_DEBUG, DT_TEXTREL, DT_JMPREL, DT_BIND_NOW, DT_INIT_ARRAY, DT_FINI_ARRAY = 21, 22, 23, 24, 25, 26
DT_INIT_ARRAYSZ, DT_FINI_ARRAYSZ, DT_RUNPATH, DT_FLAGS = 27, 28, 29, 30
DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ = 32, 33
DT_RELRSZ, DT_RELR, DT_RELRENT = 35, 36, 37
DT_GNU_FLAGS_1, DT_GNU_PRELINKED, DT_CHECKSUM = 0x6FFFFDF4, 0x6FFFFDF5, 0x6FFFFDF8
DT_GNU_HASH, DT_TLSDESC_PLT, DT_TLSDESC_GOT = 0x6FFFFEF5, 0x6FFFFEF6, 0x6FFFFEF7
DT_DEPAUDIT, DT_AUDIT = 0x6FFFFEFB, 0x6FFFFEFC
DT_VERSYM, DT_RELACOUNT, DT_RELCOUNT, DT_FLAGS_1 = 0x6FFFFFF0, 0x6FFFFFF9, 0x6FFFFFFA, 0x6FFFFFFB
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT_AUXILIARY, DT_FILTER = 0x7FFFFFFD, 0x7FFFFFFF
DF_BIND_NOW = 0x8
EM_386, EM_X86_64 = 3, 62
DF_1_NOW, DF_1_NOOPEN, DF_1_PIE = 0x1, 0x40, 0x08000000

_TAGS = {
    DT_NEEDED, DT_PLTRELSZ, DT_PLTGOT, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_RELA, DT_RELASZ, DT_RELAENT,
    DT_STRSZ, DT_SYMENT, DT_INIT, DT_FINI, DT_SONAME, DT_RPATH, DT_SYMBOLIC, DT_REL, DT_RELSZ,
    DT_RELENT, DT_PLTREL, DT_DEBUG, DT_TEXTREL, DT_JMPREL, DT_BIND_NOW, DT_INIT_ARRAY, DT_FINI_ARRAY,
    DT_INIT_ARRAYSZ, DT_FINI_ARRAYSZ, DT_RUNPATH, DT_FLAGS, DT_RELRSZ, DT_RELR, DT_RELRENT,
    DT_GNU_FLAGS_1, DT_GNU_PRELINKED, DT_CHECKSUM, DT_GNU_HASH, DT_TLSDESC_PLT, DT_TLSDESC_GOT,
    DT_VERSYM, DT_RELACOUNT, DT_RELCOUNT, DT_FLAGS_1, DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM,
}
#: Processor-specific tags linkers write (DT_LOPROC + n), by e_machine.
_PROCESSOR_TAGS = {
    62: {0x70000000, 0x70000001, 0x70000003},  # DT_X86_64_PLT, _PLTSZ, _PLTENT
    183: {0x70000001, 0x70000003, 0x70000005, 0x70000009, 0x7000000B, 0x7000000C, 0x7000000D,
          0x7000000F},  # DT_AARCH64_BTI_PLT, _PAC_PLT, _VARIANT_PCS, _MEMTAG_*
    21: {0x70000000, 0x70000001, 0x70000002, 0x70000003},  # DT_PPC64_GLINK, _OPD, _OPDSZ, _OPT
    243: {0x70000001},  # DT_RISCV_VARIANT_CC
}
_REFUSED = {
    DT_PREINIT_ARRAY: "DT_PREINIT_ARRAY, which only executables may have",
    DT_PREINIT_ARRAYSZ: "DT_PREINIT_ARRAYSZ, which only executables may have",
    DT_AUXILIARY: "DT_AUXILIARY: it makes the loader look up its symbols in another library",
    DT_FILTER: "DT_FILTER: it makes the loader look up its symbols in another library",
    DT_AUDIT: "DT_AUDIT: it asks the loader to load an audit library",
    DT_DEPAUDIT: "DT_DEPAUDIT: it asks the loader to load an audit library",
}
#: Section type -> (the tag holding its address, the tag holding its size or None).
_TABLES = {
    SHT_DYNSYM: (DT_SYMTAB, None),
    SHT_HASH: (DT_HASH, None),
    SHT_GNU_HASH: (DT_GNU_HASH, None),
    SHT_GNU_VERSYM: (DT_VERSYM, None),
    SHT_GNU_VERNEED: (DT_VERNEED, None),
    SHT_GNU_VERDEF: (DT_VERDEF, None),
    SHT_INIT_ARRAY: (DT_INIT_ARRAY, DT_INIT_ARRAYSZ),
    SHT_FINI_ARRAY: (DT_FINI_ARRAY, DT_FINI_ARRAYSZ),
}
#: R_<machine>_RELATIVE, the relocation DT_RELACOUNT/DT_RELCOUNT promises at the start.
_RELATIVE = {62: 8, 183: 1027, 3: 8, 21: 22, 22: 12, 40: 23, 243: 3}


@dataclass(frozen=True)
class Dynamic:
    """The dynamic entries the checks use."""

    values: dict[int, int]  # every tag but DT_NEEDED -> its value
    needed: tuple[str, ...]
    soname: str | None
    rpaths: tuple[str, ...]  # DT_RPATH and DT_RUNPATH entries, split on ':'
    strings: bytes  # the dynamic string table
    strtab: Section | None

    @property
    def bind_now(self) -> bool:
        return DT_BIND_NOW in self.values or bool(self.values.get(DT_FLAGS, 0) & DF_BIND_NOW) \
            or bool(self.values.get(DT_FLAGS_1, 0) & DF_1_NOW)


def read_dynamic(layout: Layout) -> Dynamic:
    """The dynamic entries, checked against the sections and the loader's rules."""
    entries = _entries(layout)
    values = _unique_values(layout, entries)
    _check_flags(layout, values)
    _check_tables(layout, values)
    _check_relocations(layout, values)
    _check_code_and_got(layout, values)
    strtab = _string_table(layout, values)
    strings = layout.string_table(strtab.index, "DT_STRTAB") if strtab else b""
    texts = {tag: [_entry_string(layout, strings, value, tag) for t, value in entries if t == tag]
             for tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH)}
    for needed in texts[DT_NEEDED]:
        if "/" in needed:
            layout.fail(f"it needs the library path {needed!r}: the loader would open that file "
                        "on the user's machine")
    rpaths = tuple(p for text in texts[DT_RPATH] + texts[DT_RUNPATH] for p in text.split(":") if p)
    soname = texts[DT_SONAME][0] if texts[DT_SONAME] else None
    return Dynamic(values, tuple(texts[DT_NEEDED]), soname, rpaths, strings, strtab)


def _entries(layout: Layout) -> list[tuple[int, int]]:
    """(tag, value) up to DT_NULL, from PT_DYNAMIC's bytes: the loader's own view."""
    segment = layout.of_type(PT_DYNAMIC)[0]
    entry = struct.Struct(layout.header.order + ("qQ" if layout.header.is64 else "iI"))
    raw = layout.view(segment.offset, segment.filesz, "its PT_DYNAMIC segment")
    entries: list[tuple[int, int]] = []
    for offset in range(0, len(raw) - entry.size + 1, entry.size):  # bounded by the segment
        tag, value = entry.unpack_from(raw, offset)
        if tag == DT_NULL:
            return entries
        entries.append((tag, value))
    layout.fail("its dynamic entries do not end with DT_NULL inside PT_DYNAMIC (the loader "
                "would read past them)")


def _unique_values(layout: Layout, entries: list[tuple[int, int]]) -> dict[int, int]:
    values: dict[int, int] = {}
    known = _TAGS | _PROCESSOR_TAGS.get(layout.header.machine, set())
    for tag, value in entries:
        if tag in _REFUSED:
            layout.fail(f"its dynamic section has {_REFUSED[tag]}")
        if tag not in known:
            layout.fail(f"its dynamic section has tag {tag:#x}, which no loader of this machine "
                        "reads (an entry it skips changes what the library means)")
        if tag == DT_NEEDED:
            continue
        if tag in values:
            layout.fail(f"its dynamic section has tag {tag:#x} twice (the loader keeps the last, "
                        "the checks would read the first)")
        values[tag] = value
    return values


def _check_flags(layout: Layout, values: dict[int, int]) -> None:
    flags_1 = values.get(DT_FLAGS_1, 0)
    if flags_1 & DF_1_PIE:
        layout.fail("a position-independent executable (DF_1_PIE): dlopen refuses it")
    if flags_1 & DF_1_NOOPEN:
        layout.fail("DF_1_NOOPEN: dlopen refuses it")


def _alloc_of_type(layout: Layout, sh_type: int) -> list[Section]:
    return [s for s in layout.sections if s.type == sh_type and s.allocated]


def _check_tables(layout: Layout, values: dict[int, int]) -> None:
    """Each table the loader finds through a tag is the section of that kind."""
    if _alloc_of_type(layout, SHT_PREINIT_ARRAY):
        layout.fail("it has a .preinit_array section, which only executables may have")
    for sh_type, (address_tag, size_tag) in _TABLES.items():
        sections = _alloc_of_type(layout, sh_type)
        if len(sections) > 1:
            layout.fail(f"{len(sections)} sections of type {sh_type:#x} (a shared object has one)")
        _check_table(layout, sections[0] if sections else None, values, address_tag, size_tag)
    dynsym = layout.first(SHT_DYNSYM)
    if dynsym is not None and values.get(DT_SYMENT) != dynsym.entsize:
        layout.fail(f"DT_SYMENT {values.get(DT_SYMENT)} is not the symbol table's entry size "
                    f"{dynsym.entsize}")
    for sh_type, count_tag in ((SHT_GNU_VERNEED, DT_VERNEEDNUM), (SHT_GNU_VERDEF, DT_VERDEFNUM)):
        section = layout.first(sh_type)
        if section is not None and values.get(count_tag) != section.info:
            layout.fail(f"tag {count_tag:#x} says {values.get(count_tag)} version entries, its "
                        f"section {section.info}")
        if section is None and count_tag in values:
            layout.fail(f"tag {count_tag:#x} counts version entries that do not exist")


def _check_table(layout: Layout, section: Section | None, values: dict[int, int],
                 address_tag: int, size_tag: int | None) -> None:
    address = values.get(address_tag)
    if section is None or not section.size:
        if address is not None and section is None:
            layout.fail(f"dynamic tag {address_tag:#x} points to a table no section describes")
        return
    if address != section.addr:
        where = "is missing" if address is None else f"says {address:#x}"
        layout.fail(f"the loader finds section {section.name or section.index} through dynamic tag "
                    f"{address_tag:#x}, which {where} (the section is at {section.addr:#x})")
    if size_tag is not None and values.get(size_tag) != section.size:
        layout.fail(f"dynamic tag {size_tag:#x} says {values.get(size_tag)} bytes, section "
                    f"{section.name or section.index} has {section.size}")


def _string_table(layout: Layout, values: dict[int, int]) -> Section | None:
    """The section DT_STRTAB/DT_STRSZ describe: the dynamic symbols' and the dynamic
    section's string table."""
    dynamic = layout.first(SHT_DYNAMIC)
    dynsym = layout.first(SHT_DYNSYM)
    links = {s.link for s in (dynamic, dynsym) if s is not None}
    if len(links) > 1:
        layout.fail("its dynamic section and dynamic symbols use different string tables")
    if not links:
        if DT_STRTAB in values:
            layout.fail("DT_STRTAB points to a table no section describes")
        return None
    index = links.pop()
    if not 0 < index < len(layout.sections):
        layout.fail(f"its dynamic string table link {index} is broken")
    strtab = layout.sections[index]
    if not strtab.allocated:
        layout.fail("its dynamic string table is not loaded")
    if values.get(DT_STRTAB) != strtab.addr or values.get(DT_STRSZ) != strtab.size:
        layout.fail(f"DT_STRTAB/DT_STRSZ ({values.get(DT_STRTAB)}, {values.get(DT_STRSZ)}) are not "
                    f"its dynamic string table ({strtab.addr:#x}, {strtab.size})")
    return strtab


def _entry_string(layout: Layout, strings: bytes, offset: int, tag: int) -> str:
    end = strings.find(b"\0", offset)
    if offset >= len(strings) or end < 0:
        layout.fail(f"dynamic tag {tag} names a string at {offset:#x}, outside DT_STRSZ "
                    f"({len(strings)} bytes)")
    text = strings[offset:end].decode("utf-8", "replace")
    if not text or not text.isprintable():
        layout.fail(f"dynamic tag {tag} names {text!r}, which is no library name or path")
    return text


def _check_relocations(layout: Layout, values: dict[int, int]) -> None:
    is64 = layout.header.is64
    plt_type = values.get(DT_PLTREL)
    if DT_JMPREL in values and plt_type not in (DT_RELA, DT_REL):
        layout.fail(f"DT_PLTREL is {plt_type} (the loader stops on anything but DT_REL or DT_RELA)")
    plt_section, plt_size = (SHT_RELA, 24 if is64 else 12) if plt_type == DT_RELA \
        else (SHT_REL, 16 if is64 else 8)
    ranges = [
        (DT_RELA, DT_RELASZ, values.get(DT_RELAENT), SHT_RELA, 24 if is64 else 12),
        (DT_REL, DT_RELSZ, values.get(DT_RELENT), SHT_REL, 16 if is64 else 8),
        (DT_RELR, DT_RELRSZ, values.get(DT_RELRENT), SHT_RELR, 8 if is64 else 4),
        (DT_JMPREL, DT_PLTRELSZ, plt_size, plt_section, plt_size),
    ]
    covered: set[int] = set()
    for address_tag, size_tag, entsize, sh_type, expected in ranges:
        if address_tag not in values and size_tag not in values:
            continue
        if address_tag not in values or size_tag not in values or entsize != expected:
            layout.fail(f"relocation tags {address_tag:#x}/{size_tag:#x} come without their size "
                        f"or with entry size {entsize} ({expected} expected): the loader stops on it")
        covered |= _tile(layout, values[address_tag], values[size_tag], sh_type, expected)
    for sh_type in (SHT_RELA, SHT_REL, SHT_RELR):
        for section in _alloc_of_type(layout, sh_type):
            if section.size and section.index not in covered:
                layout.fail(f"relocation section {section.name or section.index} is not where the "
                            "dynamic entries say: the loader would not apply it")
    _check_relative_count(layout, values, DT_RELACOUNT, DT_RELA, DT_RELASZ, 24 if is64 else 12)
    _check_relative_count(layout, values, DT_RELCOUNT, DT_REL, DT_RELSZ, 16 if is64 else 8)


def _tile(layout: Layout, address: int, size: int, sh_type: int, entsize: int) -> set[int]:
    """The relocation sections that exactly fill [address, address+size)."""
    if size == 0:
        return set()
    if size % entsize:
        layout.fail(f"a relocation table of {size} bytes is not a whole number of {entsize}-byte entries")
    by_address = {s.addr: s for s in _alloc_of_type(layout, sh_type) if s.size}
    covered = set()
    cursor, end = address, address + size
    while cursor < end:  # every step consumes a section: bounded by the section count
        section = by_address.pop(cursor, None)
        if section is None:
            layout.fail(f"relocations at {cursor:#x} (dynamic entries: {address:#x}, {size} bytes) "
                        "are not a relocation section's")
        covered.add(section.index)
        cursor += section.size
    if cursor != end:
        layout.fail(f"a relocation table ({address:#x}, {size} bytes) ends inside a section")
    return covered


def _check_relative_count(layout: Layout, values: dict[int, int], count_tag: int, address_tag: int,
                          size_tag: int, entsize: int) -> None:
    """The loader applies the first DT_RELACOUNT relocations as R_*_RELATIVE without
    reading their type: a count larger than the run of RELATIVE ones corrupts the others."""
    count = values.get(count_tag)
    if count is None:
        return
    total = values.get(size_tag, 0) // entsize
    if count > total:
        layout.fail(f"tag {count_tag:#x} counts {count} relative relocations, the table has {total}")
    relative = _RELATIVE.get(layout.header.machine)
    if relative is None or count == 0:
        return
    offset = layout.file_offset(values[address_tag], count * entsize, "the relative relocations")
    raw = layout.view(offset, count * entsize, "the relative relocations")
    words = words_of(layout, raw, "Q" if layout.header.is64 else "I")
    per_entry = entsize // words.itemsize
    infos = words[1::per_entry]  # r_info of each entry
    mask = 0xFFFFFFFF if layout.header.is64 else 0xFF
    if any(info & mask != relative for info in set(infos)):
        layout.fail(f"tag {count_tag:#x} counts {count} relative relocations, but some of them are "
                    "not relative: the loader would apply them as relative")


def _check_code_and_got(layout: Layout, values: dict[int, int]) -> None:
    for tag in (DT_INIT, DT_FINI):
        if tag not in values:
            continue
        load = layout.load_holding(values[tag], 1)
        if load is None or not load.flags & PF_X:
            layout.fail(f"dynamic tag {tag} points the loader at {values[tag]:#x} to run, which is "
                        "not in an executable segment")
    if DT_PLTGOT in values:
        word = layout.header.word
        load = layout.load_holding(values[DT_PLTGOT], 3 * word, in_file=False)
        if load is None or not load.flags & PF_W:
            layout.fail(f"DT_PLTGOT ({values[DT_PLTGOT]:#x}) is not in a writable segment: the "
                        "loader writes there")
        # Where DT_PLTGOT points is the machine's ABI; on x86 it is .got.plt (.got without one).
        x86 = layout.header.machine in (EM_386, EM_X86_64) and layout.header.shstrndx
        got = (layout.named(".got.plt") or layout.named(".got")) if x86 else None
        if got is not None and got.addr != values[DT_PLTGOT]:
            layout.fail(f"DT_PLTGOT ({values[DT_PLTGOT]:#x}) is not section {got.name} ({got.addr:#x})")
    for tag, flag in ((DT_TLSDESC_PLT, PF_X), (DT_TLSDESC_GOT, PF_W)):
        if tag in values:
            load = layout.load_holding(values[tag], 1, in_file=False)
            if load is None or not load.flags & flag:
                layout.fail(f"dynamic tag {tag:#x} ({values[tag]:#x}) is outside its segment")
