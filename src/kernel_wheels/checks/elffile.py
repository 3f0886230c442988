"""Reading what the checks need from an ELF shared object, in one pass over its tables.

Why not pyelftools for this: a torch-sized library has ~75,000 dynamic and ~530,000
static symbols, and walking them as Python objects takes seconds per walk (auditwheel
and abi3audit each walk them several times). The few tables the checks need (dynamic
section, dynamic symbols and their versions, the static symbol table's Python names) are
read here with ``struct`` over a memory map: the file is never copied into memory.
Malformed files raise :class:`ElfError` with a one-line reason.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from .. import data

ELF_MAGIC = b"\x7fELF"

_SHT_SYMTAB, _SHT_STRTAB, _SHT_DYNAMIC, _SHT_DYNSYM = 2, 3, 6, 11
_SHT_GNU_VERNEED, _SHT_GNU_VERSYM = 0x6FFFFFFE, 0x6FFFFFFF
_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 1, 14, 15, 29
_SHN_UNDEF = 0
_STB_LOCAL, _STB_GNU_UNIQUE = 0, 10
_PYTHON_PREFIXES = (b"Py", b"_Py")


class ElfError(Exception):
    """The file is not a well-formed ELF shared object."""


@dataclass(frozen=True)
class PythonSymbol:
    name: str
    local: bool  # a local (or GNU unique) symbol: inlined limited-API code, fine for abi3
    defined: bool


@dataclass(frozen=True)
class ElfInfo:
    arcname: str
    machine: str  # "EM_X86_64", "EM_AARCH64", ... (or "EM_<number>")
    needed: tuple[str, ...]
    rpaths: tuple[str, ...]
    soname: str | None
    #: Defined dynamic symbols named PyInit_* (an extension module's entry point).
    init_functions: frozenset[str]
    #: (symbol, "GLIBC_2.32") for every undefined dynamic symbol with a version.
    versioned_imports: tuple[tuple[str, str], ...]
    #: {library soname: {"GLIBC_2.14", ...}} from the version-needs table.
    version_needs: dict[str, frozenset[str]]
    #: Undefined dynamic symbols (for the manylinux policies' symbol blacklists).
    undefined: frozenset[str]
    #: Py*/_Py* symbols of the dynamic and static symbol tables (the limited-API audit).
    python_symbols: tuple[PythonSymbol, ...]


class _Reader:
    def __init__(self, buffer: mmap.mmap | bytes, name: str) -> None:
        self.buf = buffer
        self.name = name
        if len(buffer) < 52 or buffer[:4] != ELF_MAGIC:
            raise ElfError(f"{name} is not an ELF file")
        elf_class, encoding = buffer[4], buffer[5]
        if elf_class not in (1, 2) or encoding not in (1, 2):
            raise ElfError(f"{name}: unknown ELF class or byte order")
        self.is64 = elf_class == 2
        self.end = "<" if encoding == 1 else ">"
        header = self.unpack("HHIQQQIHHHHHH" if self.is64 else "HHIIIIIHHHHHH", 16)
        _type, machine, _version, _entry, _phoff, shoff, _flags, _ehsize, _phentsize, _phnum, \
            shentsize, shnum, shstrndx = header
        self.machine = machine
        if shoff == 0 or shnum == 0:
            raise ElfError(f"{name} has no section headers")
        expected = 64 if self.is64 else 40
        if shentsize != expected:
            raise ElfError(f"{name}: unexpected section header size {shentsize}")
        fmt = "IIQQQQIIQQ" if self.is64 else "IIIIIIIIII"
        self.sections = []
        name_offsets = []
        for index in range(shnum):
            fields = self.unpack(fmt, shoff + index * shentsize)
            sh_type, offset, size, link, entsize = fields[1], fields[4], fields[5], fields[6], fields[9]
            self.sections.append((sh_type, offset, size, link, entsize))
            name_offsets.append(fields[0])
        self.names: list[str] = []
        if 0 < shstrndx < shnum and self.sections[shstrndx][0] == _SHT_STRTAB:
            names = bytes(self.section_bytes(shstrndx))
            self.names = [_string(names, offset) for offset in name_offsets]

    def unpack(self, fmt: str, offset: int) -> tuple[int, ...]:
        layout = struct.Struct(self.end + fmt)
        if offset < 0 or offset + layout.size > len(self.buf):
            raise ElfError(f"{self.name} is truncated (a header lies past the end of the file)")
        return layout.unpack_from(self.buf, offset)

    def section_bytes(self, index: int) -> memoryview:
        sh_type, offset, size, _link, _entsize = self.sections[index]
        if offset + size > len(self.buf):
            raise ElfError(f"{self.name} is truncated (a section lies past the end of the file)")
        return memoryview(self.buf)[offset:offset + size]

    def string_table(self, index: int) -> bytes:
        if not 0 <= index < len(self.sections) or self.sections[index][0] != _SHT_STRTAB:
            raise ElfError(f"{self.name}: a string table link is broken")
        return bytes(self.section_bytes(index))

    def first(self, sh_type: int) -> int | None:
        return next((i for i, s in enumerate(self.sections) if s[0] == sh_type), None)

    def named(self, name: str) -> int | None:
        return next((i for i, n in enumerate(self.names) if n == name), None)


def _string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise ElfError("a symbol name lies outside its string table")
    return table[offset:end].decode("utf-8", "replace")


def _dynamic(reader: _Reader) -> tuple[list[str], list[str], str | None]:
    needed: list[str] = []
    rpaths: list[str] = []
    soname = None
    index = reader.first(_SHT_DYNAMIC)
    if index is None:
        return needed, rpaths, soname
    strings = reader.string_table(reader.sections[index][3])
    layout = struct.Struct(reader.end + ("qQ" if reader.is64 else "iI"))
    raw = reader.section_bytes(index)
    for tag, value in layout.iter_unpack(raw[:len(raw) - len(raw) % layout.size]):
        if tag == 0:
            break
        if tag == _DT_NEEDED:
            needed.append(_string(strings, value))
        elif tag == _DT_SONAME:
            soname = _string(strings, value)
        elif tag in (_DT_RPATH, _DT_RUNPATH):
            rpaths.extend(p for p in _string(strings, value).split(":") if p)
    return needed, rpaths, soname


def _version_needs(reader: _Reader) -> tuple[dict[str, frozenset[str]], dict[int, str]]:
    """({library: versions}, {version index: version name}) from .gnu.version_r."""
    index = reader.first(_SHT_GNU_VERNEED)
    needs: dict[str, set[str]] = {}
    names: dict[int, str] = {}
    if index is None:
        return {}, {}
    _type, offset, size, link, _entsize = reader.sections[index]
    strings = reader.string_table(link)
    entry = offset
    for _ in range(10_000):  # a loop bound: a corrupt chain must not spin forever
        _vn_version, count, vn_file, vn_aux, vn_next = reader.unpack("HHIII", entry)
        library = _string(strings, vn_file)
        aux = entry + vn_aux
        for _ in range(count):
            _hash, _flags, other, vna_name, vna_next = reader.unpack("IHHII", aux)
            version = _string(strings, vna_name)
            needs.setdefault(library, set()).add(version)
            names[other & 0x7FFF] = version
            if vna_next == 0:
                break
            aux += vna_next
        if vn_next == 0:
            break
        entry += vn_next
        if entry >= offset + size:
            break
    return {lib: frozenset(v) for lib, v in needs.items()}, names


def _symbols(reader: _Reader, index: int) -> tuple[bytes, list[tuple[int, int, int, int]]]:
    """(string table, [(st_name, bind, shndx, position)]) of a symbol table."""
    _type, _offset, size, link, _entsize = reader.sections[index]
    strings = reader.string_table(link)
    layout = struct.Struct(reader.end + ("IBBHQQ" if reader.is64 else "IIIBBH"))
    raw = reader.section_bytes(index)
    raw = raw[:len(raw) - len(raw) % layout.size]
    rows = []
    if reader.is64:
        for position, (st_name, info, _other, shndx, _value, _size) in \
                enumerate(layout.iter_unpack(raw)):
            rows.append((st_name, info >> 4, shndx, position))
    else:
        for position, (st_name, _value, _size, info, _other, shndx) in \
                enumerate(layout.iter_unpack(raw)):
            rows.append((st_name, info >> 4, shndx, position))
    return strings, rows


def _python_symbols(strings: bytes, rows: list[tuple[int, int, int, int]],
                    gnu_unique_is_local: bool) -> list[PythonSymbol]:
    found = []
    for st_name, bind, shndx, _position in rows:
        if st_name and strings.startswith(_PYTHON_PREFIXES, st_name):
            local = bind == _STB_LOCAL or (bind == _STB_GNU_UNIQUE and gnu_unique_is_local)
            found.append(PythonSymbol(_string(strings, st_name), local, shndx != _SHN_UNDEF))
    return found


def read_elf(path: Path, arcname: str) -> ElfInfo:
    """The facts the checks need from the ELF file at ``path`` (named ``arcname``)."""
    with path.open("rb") as stream:
        try:
            buffer: mmap.mmap | bytes = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            buffer = b""
        try:
            return _read(buffer, arcname)
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise ElfError(f"{arcname} is a malformed ELF file ({exc})") from None
        finally:
            if isinstance(buffer, mmap.mmap):
                buffer.close()


def read_elf_bytes(data: bytes, arcname: str) -> ElfInfo:
    """:func:`read_elf` on a binary held in memory."""
    try:
        return _read(data, arcname)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ElfError(f"{arcname} is a malformed ELF file ({exc})") from None


def _read(buffer: mmap.mmap | bytes, arcname: str) -> ElfInfo:
    reader = _Reader(buffer, arcname)
    machines = {number: name for name, number in data.load("binaries")["elf_machine_numbers"].items()}
    needed, rpaths, soname = _dynamic(reader)
    version_needs, version_names = _version_needs(reader)
    # abi3audit's rule: in a GCC-built object STB_LOOS means STB_GNU_UNIQUE, a local kind.
    comment = reader.named(".comment")
    gnu_unique_is_local = comment is not None and b"GCC" in reader.section_bytes(comment).tobytes()
    init_functions: set[str] = set()
    undefined: set[str] = set()
    imports: list[tuple[str, str]] = []
    python: list[PythonSymbol] = []
    dynsym = reader.first(_SHT_DYNSYM)
    if dynsym is not None:
        strings, rows = _symbols(reader, dynsym)
        versym_index = reader.first(_SHT_GNU_VERSYM)
        versions = reader.section_bytes(versym_index).cast("B") if versym_index is not None else None
        for st_name, _bind, shndx, position in rows:
            if not st_name:
                continue
            if shndx == _SHN_UNDEF:
                name = _string(strings, st_name)
                undefined.add(name)
                if versions is not None and 2 * position + 2 <= len(versions):
                    ndx = struct.unpack_from(reader.end + "H", versions, 2 * position)[0] & 0x7FFF
                    if ndx in version_names:
                        imports.append((name, version_names[ndx]))
            elif strings.startswith(b"PyInit_", st_name):
                init_functions.add(_string(strings, st_name))
        python += _python_symbols(strings, rows, gnu_unique_is_local)
    symtab = reader.first(_SHT_SYMTAB)
    if symtab is not None:
        strings, rows = _symbols(reader, symtab)
        python += _python_symbols(strings, rows, gnu_unique_is_local)
    return ElfInfo(
        arcname=arcname,
        machine=machines.get(reader.machine, f"EM_{reader.machine}"),
        needed=tuple(needed),
        rpaths=tuple(rpaths),
        soname=soname,
        init_functions=frozenset(init_functions),
        versioned_imports=tuple(imports),
        version_needs=version_needs,
        undefined=frozenset(undefined),
        python_symbols=tuple(python),
    )
