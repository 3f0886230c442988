"""Symbol tables and the dynamic symbols' hash tables, with every index and offset checked.

Symbol tables are large (torch's: ~75,000 dynamic and ~530,000 static symbols), so the
checks that look at every symbol run over ``array`` views in C, not Python loops.
"""

from __future__ import annotations

import re
import struct
from array import array
from dataclasses import dataclass
from itertools import compress

from .layout import SHN_LORESERVE, Layout, Section

SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STT_FUNC, STT_SECTION = 2, 3

#: (st_name, binding, type, st_shndx, index) of one symbol.
Row = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class SymbolTable:
    section: Section
    strings: bytes
    rows: list[Row]
    raw: bytes


def words_of(layout: Layout, raw: bytes, code: str) -> array[int]:
    """``raw`` as an array of unsigned integers of the file's byte order."""
    words = array(code)
    words.frombytes(raw)
    if (layout.header.order == "<") != (struct.pack("=H", 1) == b"\x01\x00"):
        words.byteswap()
    return words


def read_symbols(layout: Layout, section: Section, *, python_only: bool = False) -> SymbolTable:
    """A symbol table's rows, each name inside its string table. ``python_only`` keeps
    only the rows whose names may start with ``Py`` or ``_Py``: the static symbol table is
    read for its Python symbols alone, and a Python loop over its half a million rows
    costs more than every check together."""
    is64 = layout.header.is64
    entsize = 24 if is64 else 16
    what = f"symbol table {section.name or section.index}"
    if section.entsize != entsize or section.size % entsize:
        layout.fail(f"{what}: {section.size} bytes of {section.entsize}-byte entries "
                    f"({entsize} expected)")
    strings = layout.string_table(section.link, what)
    raw = layout.section_bytes(section)
    count = len(raw) // entsize
    if section.info > count:
        layout.fail(f"{what} says its first global symbol is {section.info} of {count}")
    names = words_of(layout, raw, "I")[0::entsize // 4]  # st_name leads every entry
    if names and max(names) >= len(strings):
        layout.fail(f"{what} has a symbol name outside its string table ({max(names):#x})")
    entry = struct.Struct(layout.header.order + ("IBBHQQ" if is64 else "IIIBBH"))
    if not python_only:
        fields = entry.iter_unpack(raw)
        if is64:
            rows = [(name, info >> 4, info & 0xF, shndx, index)
                    for index, (name, info, _other, shndx, _value, _size) in enumerate(fields)]
        else:
            rows = [(name, info >> 4, info & 0xF, shndx, index)
                    for index, (name, _value, _size, info, _other, shndx) in enumerate(fields)]
        return SymbolTable(section, strings, rows, raw)
    # Every offset where such a name could start (names share tails: any offset).
    starts = {match.start() for match in re.finditer(b"Py", strings)}
    starts |= {start - 1 for start in starts if start and strings[start - 1] == ord("_")}
    rows = []
    for index in compress(range(count), map(starts.__contains__, names)):
        if is64:
            name, info, _other, shndx, _value, _size = entry.unpack_from(raw, index * entsize)
        else:
            name, _value, _size, info, _other, shndx = entry.unpack_from(raw, index * entsize)
        rows.append((name, info >> 4, info & 0xF, shndx, index))
    return SymbolTable(section, strings, rows, raw)


def symbol_name(layout: Layout, table: SymbolTable, offset: int) -> str:
    strings = table.strings
    end = strings.find(b"\0", offset)
    if end < 0:
        layout.fail(f"a symbol name at {offset:#x} runs past its string table")
    name = strings[offset:end].decode("utf-8", "replace")
    if not name.isprintable():
        layout.fail(f"a symbol name holds control characters ({name!r})")
    return name


def check_dynamic_symbols(layout: Layout, table: SymbolTable) -> None:
    """What the loader's lookups rely on: a section index for every defined symbol, a
    name and a global or weak binding for every undefined one."""
    shnum = len(layout.sections)
    for shndx in {row[3] for row in table.rows}:
        if shnum <= shndx < SHN_LORESERVE or (shndx >= SHN_LORESERVE and shndx not in (SHN_ABS, SHN_COMMON)):
            layout.fail(f"a dynamic symbol is in section {shndx:#x}, which does not exist")
    strings = table.strings
    for st_name, bind, sym_type, shndx, index in table.rows[1:]:
        if not strings[st_name] and sym_type != STT_SECTION:
            layout.fail(f"dynamic symbol {index} has no name: the loader cannot look it up")
        if shndx == SHN_UNDEF and bind not in (STB_GLOBAL, STB_WEAK):
            layout.fail(f"undefined dynamic symbol {index} is not global or weak: the loader would "
                        "bind it to address 0")


def check_hash_tables(layout: Layout, sh_hash: Section | None, gnu_hash: Section | None,
                      symbols: int) -> None:
    """The loader looks symbols up through these tables; every index in their headers and
    buckets must be a symbol, and every GNU chain must end inside the table."""
    if sh_hash is not None:
        words = words_of(layout, layout.section_bytes(sh_hash), "I")
        if len(words) < 2 or len(words) != 2 + words[0] + words[1] or words[1] != symbols \
                or (len(words) > 2 and max(words[2:]) >= symbols):
            layout.fail(f"hash table {sh_hash.name or sh_hash.index} does not index its "
                        f"{symbols} dynamic symbols")
    if gnu_hash is not None:
        _check_gnu_hash(layout, gnu_hash, symbols)


def _check_gnu_hash(layout: Layout, section: Section, symbols: int) -> None:
    what = f"GNU hash table {section.name or section.index}"
    raw = layout.section_bytes(section)
    if len(raw) < 16:
        layout.fail(f"{what} is too short")
    buckets, offset, bloom, _shift = struct.unpack_from(layout.header.order + "IIII", raw, 0)
    start = 16 + bloom * layout.header.word
    if buckets == 0 or not bloom or bloom & (bloom - 1) or offset > symbols \
            or len(raw) < start + 4 * buckets:
        layout.fail(f"{what}: {buckets} buckets and {bloom} bloom words do not fit its {len(raw)} bytes")
    heads = words_of(layout, raw[start:start + 4 * buckets], "I")
    if not any(heads):
        return  # no symbol is hashed: the loader never reads a chain
    chains = symbols - offset
    if max(heads) >= symbols or any(0 < head < offset for head in set(heads)):
        layout.fail(f"{what} has a bucket outside its symbols")
    if len(raw) < start + 4 * (buckets + chains):
        layout.fail(f"{what} has no room for the hash chains of its {chains} symbols")
    end = start + 4 * (buckets + chains)
    if chains and not words_of(layout, raw[end - 4:end], "I")[0] & 1:
        layout.fail(f"{what}: its last chain does not end (the loader would read past it)")


def check_entry_points(layout: Layout, entry_points: dict[str, int], tables: list[SymbolTable]) -> None:
    """The loader calls DT_INIT and DT_FINI: each must be the start of .init/.fini or of
    a function symbol (``-Wl,-init=`` names one), not just any byte of code."""
    for section_name, address in entry_points.items():
        section = layout.named(section_name) if layout.header.shstrndx else None
        if section is not None and section.addr == address:
            continue
        if not any(_function_at(layout, table, address) for table in tables):
            layout.fail(f"the loader would call {address:#x} to {section_name.lstrip('.')} it, which "
                        f"is neither its {section_name} section nor a function")


def _function_at(layout: Layout, table: SymbolTable, address: int) -> bool:
    is64 = layout.header.is64
    entsize, info_at = (24, 4) if is64 else (16, 12)
    values = words_of(layout, table.raw, "Q" if is64 else "I")[1::entsize // (8 if is64 else 4)]
    start = 0
    while True:  # each step moves past one symbol: bounded by the table
        try:
            index = values.index(address, start)
        except ValueError:
            return False
        if table.raw[index * entsize + info_at] & 0xF == STT_FUNC:
            return True
        start = index + 1
