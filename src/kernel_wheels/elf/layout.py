"""The frame of an ELF shared object: its ELF header, program headers and section headers,
read with every offset, size and count checked against the file before it is used.

What glibc's loader refuses here (elf/dl-load.c, ``open_verify``): a wrong magic, class,
byte order or identification version, an OS ABI other than System V/GNU or an ABI version
it does not know, nonzero identification padding, a wrong ``e_version``, a type other than
a shared object (``dlopen`` refuses executables), a program header entry of the wrong size
and a program header table it cannot read whole. The reader refuses that, and the rest of
what makes a table unreadable: a section header table or a section past the end of the
file, entry sizes the format does not have, links to sections that do not exist.
What the segments and sections must say about each other is ``mapping``'s job.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import NoReturn

ELF_MAGIC = b"\x7fELF"

ET_DYN = 3
EV_CURRENT = 1
ELFOSABI_SYSV, ELFOSABI_GNU = 0, 3
SHN_LORESERVE, SHN_XINDEX = 0xFF00, 0xFFFF
PN_XNUM = 0xFFFF

PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR, PT_TLS = 1, 2, 3, 4, 6, 7
PT_GNU_EH_FRAME, PT_GNU_STACK, PT_GNU_RELRO, PT_GNU_PROPERTY = 0x6474E550, 0x6474E551, 0x6474E552, 0x6474E553
PF_X, PF_W, PF_R = 1, 2, 4

SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_HASH, SHT_DYNAMIC = 0, 1, 2, 3, 4, 5, 6
SHT_NOTE, SHT_NOBITS, SHT_REL, SHT_DYNSYM = 7, 8, 9, 11
SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY, SHT_RELR = 14, 15, 16, 19
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_TLS = 0x1, 0x2, 0x4, 0x400


@dataclass(frozen=True)
class Machine:
    """What one ``e_machine`` allows: its ELF class (None: both), its byte orders, and the
    highest ``EI_ABIVERSION`` glibc 2.28's loader accepts with the GNU OS ABI (its
    ``libc-abis``: UNIQUE, IFUNC where the machine has it, ABSOLUTE)."""

    is64: bool | None
    orders: str
    max_abi_version: int


#: e_machine -> what it allows. Machines outside this table are read as they come: the
#: wheel's platform tag names the machine it must be (``elf.check_structure``).
MACHINES = {
    62: Machine(True, "<", 3),  # EM_X86_64 (x32 is no wheel platform)
    183: Machine(True, "<", 2),  # EM_AARCH64 (manylinux aarch64 is little-endian)
    3: Machine(False, "<", 3),  # EM_386
    21: Machine(True, "<>", 3),  # EM_PPC64
    22: Machine(True, ">", 2),  # EM_S390 (s390x)
    40: Machine(False, "<", 2),  # EM_ARM
    243: Machine(None, "<", 2),  # EM_RISCV
}


class ElfError(Exception):
    """The file is not a well-formed ELF shared object (one line, naming the file)."""


def shown(name: str) -> str:
    """A member name on one line: control characters escaped (a zip member name is
    chosen by whoever made the wheel)."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name)


@dataclass(frozen=True)
class Segment:
    """One program header."""

    index: int
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int

    @property
    def vend(self) -> int:
        return self.vaddr + self.memsz

    def holds(self, vaddr: int, size: int, *, in_file: bool) -> bool:
        """True if [vaddr, vaddr+size) lies in this segment (in its file-backed part)."""
        end = self.vaddr + (self.filesz if in_file else self.memsz)
        return self.vaddr <= vaddr and vaddr + size <= end


@dataclass(frozen=True)
class Section:
    """One section header."""

    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int

    @property
    def allocated(self) -> bool:
        return bool(self.flags & SHF_ALLOC)

    @property
    def in_file(self) -> bool:
        return self.type != SHT_NOBITS


@dataclass(frozen=True)
class Header:
    """The ELF header's fields the reader uses."""

    is64: bool
    order: str  # "<" little-endian, ">" big-endian
    osabi: int
    abi_version: int
    type: int
    machine: int
    phoff: int
    shoff: int
    ehsize: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int
    shstrndx: int

    @property
    def word(self) -> int:
        return 8 if self.is64 else 4


class Layout:
    """An ELF file's headers, read from ``buffer`` and checked; every later read goes
    through :meth:`unpack` / :meth:`view`, which refuse a range outside the file. Views
    are copies, never exports of ``buffer``: a memory map must stay closable whatever
    an exception's traceback still holds."""

    def __init__(self, buffer: bytes | mmap.mmap, name: str) -> None:
        self.buf = buffer
        self.size = len(buffer)
        self.name = shown(name)
        self.header = self._read_header()
        self.segments = self._read_segments()
        self.sections = self._read_sections()

    # -- reading ------------------------------------------------------------------------
    def fail(self, reason: str) -> NoReturn:
        raise ElfError(f"{self.name}: {reason}")

    def unpack(self, fmt: str, offset: int) -> tuple[int, ...]:
        layout = struct.Struct(self.header.order + fmt)
        if offset < 0 or offset + layout.size > self.size:
            raise ElfError(f"{self.name} is truncated (a header lies past the end of the file)")
        return layout.unpack_from(self.buf, offset)

    def require_inside(self, offset: int, size: int, what: str) -> None:
        """An ElfError naming ``what`` unless [offset, offset+size) lies inside the file."""
        if offset < 0 or size < 0 or offset + size > self.size:
            self.fail(f"{what} (bytes {offset:#x}..{offset + size:#x}) lies past the end of the "
                      f"file ({self.size:#x} bytes)")

    def view(self, offset: int, size: int, what: str) -> bytes:
        """The file's bytes [offset, offset+size), or an ElfError naming ``what``."""
        self.require_inside(offset, size, what)
        return self.buf[offset:offset + size]

    def section_bytes(self, section: Section) -> bytes:
        if not section.in_file:
            return b""
        return self.view(section.offset, section.size, f"section {section.name or section.index}")

    def string_table(self, index: int, user: str) -> bytes:
        """The string table at section ``index``, which ``user`` links to."""
        if not 0 < index < len(self.sections) or self.sections[index].type != SHT_STRTAB:
            self.fail(f"{user} links to section {index}, which is not a string table")
        table = self.section_bytes(self.sections[index])
        if table and table[-1] != 0:
            self.fail(f"string table {self.sections[index].name or index} does not end with a NUL byte")
        return table

    def first(self, sh_type: int) -> Section | None:
        return next((s for s in self.sections if s.type == sh_type), None)

    def named(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def of_type(self, seg_type: int) -> list[Segment]:
        return [s for s in self.segments if s.type == seg_type]

    @property
    def loads(self) -> list[Segment]:
        return self.of_type(PT_LOAD)

    def load_holding(self, vaddr: int, size: int, *, in_file: bool = True) -> Segment | None:
        """The PT_LOAD holding [vaddr, vaddr+size), in its file-backed part if ``in_file``."""
        return next((s for s in self.loads if s.holds(vaddr, size, in_file=in_file)), None)

    def file_offset(self, vaddr: int, size: int, what: str) -> int:
        """Where the loader finds [vaddr, vaddr+size) in the file: it must lie inside the
        file-backed part of one PT_LOAD (the loader reads it from memory, after mapping)."""
        load = self.load_holding(vaddr, size)
        if load is None:
            self.fail(f"{what} (address {vaddr:#x}, {size} bytes) lies outside every loaded "
                      "segment's file contents")
        return load.offset + (vaddr - load.vaddr)

    # -- the ELF header -----------------------------------------------------------------
    def _read_header(self) -> Header:
        buf = self.buf
        if self.size < 52 or buf[:4] != ELF_MAGIC:
            raise ElfError(f"{self.name} is not an ELF file")
        elf_class, encoding, ident_version, osabi, abi_version = buf[4], buf[5], buf[6], buf[7], buf[8]
        if elf_class not in (1, 2) or encoding not in (1, 2):
            raise ElfError(f"{self.name}: unknown ELF class or byte order")
        is64, order = elf_class == 2, "<" if encoding == 1 else ">"
        fmt = order + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH")
        if self.size < 16 + struct.calcsize(fmt):
            raise ElfError(f"{self.name} is truncated (a header lies past the end of the file)")
        (e_type, machine, version, _entry, phoff, shoff, _flags, ehsize, phentsize, phnum,
         shentsize, shnum, shstrndx) = struct.unpack_from(fmt, buf, 16)
        header = Header(is64, order, osabi, abi_version, e_type, machine, phoff, shoff, ehsize,
                        phentsize, phnum, shentsize, shnum, shstrndx)
        self._check_identification(header, ident_version, buf[9:16])
        self._check_header(header, version)
        return header

    def _check_identification(self, header: Header, ident_version: int, padding: bytes) -> None:
        if ident_version != EV_CURRENT:
            self.fail(f"ELF identification version {ident_version} (the loader accepts only 1)")
        if header.osabi not in (ELFOSABI_SYSV, ELFOSABI_GNU):
            self.fail(f"OS ABI {header.osabi} (the loader accepts only System V and GNU)")
        machine = MACHINES.get(header.machine)
        highest = (machine.max_abi_version if machine else 0) if header.osabi == ELFOSABI_GNU else 0
        if header.abi_version > highest:
            self.fail(f"ABI version {header.abi_version} (glibc 2.28's loader accepts at most "
                      f"{highest} with OS ABI {header.osabi})")
        if padding != bytes(7):
            self.fail("nonzero padding in its ELF identification (the loader refuses it)")

    def _check_header(self, header: Header, version: int) -> None:
        if version != EV_CURRENT:
            self.fail(f"ELF version {version} (the loader accepts only 1)")
        if header.type != ET_DYN:
            kinds = {0: "no file type", 1: "a relocatable object", 2: "an executable", 4: "a core file"}
            self.fail(f"{kinds.get(header.type, f'ELF type {header.type}')}, not a shared object "
                      "(dlopen loads only shared objects)")
        machine = MACHINES.get(header.machine)
        if machine is not None and (machine.is64 not in (None, header.is64)
                                    or header.order not in machine.orders):
            bits = 64 if header.is64 else 32
            endian = "little" if header.order == "<" else "big"
            self.fail(f"a {bits}-bit {endian}-endian ELF file cannot be for machine "
                      f"{header.machine}")
        sizes = (64, 56, 64) if header.is64 else (52, 32, 40)
        if header.ehsize != sizes[0]:
            self.fail(f"ELF header size {header.ehsize} (it is {sizes[0]} bytes)")
        if header.phentsize != sizes[1]:
            self.fail(f"program header entry size {header.phentsize} (it is {sizes[1]} bytes; "
                      "the loader refuses any other)")
        if header.phnum == 0:
            self.fail("no program headers (the loader needs loadable segments)")
        if header.phnum == PN_XNUM:
            self.fail("65535 program headers (extended numbering, which the loader does not read)")
        if header.shoff == 0 or header.shnum == 0:
            raise ElfError(f"{self.name} has no section headers")
        if header.shentsize != sizes[2]:
            self.fail(f"unexpected section header size {header.shentsize}")
        if header.shnum >= SHN_LORESERVE:
            self.fail(f"{header.shnum} sections (extended numbering is not read)")
        if header.shstrndx >= header.shnum:
            self.fail(f"section name table index {header.shstrndx} (there are {header.shnum} sections)")

    # -- program headers ----------------------------------------------------------------
    def _read_segments(self) -> list[Segment]:
        header = self.header
        end = header.phoff + header.phnum * header.phentsize
        if end > self.size:
            self.fail(f"its program header table ({header.phnum} entries at offset {header.phoff:#x}) "
                      f"ends past the end of the file ({self.size:#x} bytes): the loader cannot read it")
        fmt = "IIQQQQQQ" if header.is64 else "IIIIIIII"
        segments = []
        for index in range(header.phnum):
            fields = self.unpack(fmt, header.phoff + index * header.phentsize)
            if header.is64:
                p_type, flags, offset, vaddr, _paddr, filesz, memsz, align = fields
            else:
                p_type, offset, vaddr, _paddr, filesz, memsz, flags, align = fields
            segments.append(Segment(index, p_type, flags, offset, vaddr, filesz, memsz, align))
        return segments

    # -- section headers ----------------------------------------------------------------
    def _read_sections(self) -> list[Section]:
        header = self.header
        if header.shoff + header.shnum * header.shentsize > self.size:
            raise ElfError(f"{self.name} is truncated (a header lies past the end of the file)")
        fmt = "IIQQQQIIQQ" if header.is64 else "IIIIIIIIII"
        raw = [self.unpack(fmt, header.shoff + i * header.shentsize) for i in range(header.shnum)]
        names = self._section_names(raw)
        sections = []
        for index, (_name, sh_type, flags, addr, offset, size, link, info, align, entsize) in enumerate(raw):
            section = Section(index, names[index], sh_type, flags, addr, offset, size, link, info,
                              align, entsize)
            if section.in_file and sh_type != SHT_NULL and offset + size > self.size:
                raise ElfError(f"{self.name} is truncated (section {section.name or index} lies past "
                               "the end of the file)")
            if link >= header.shnum:
                self.fail(f"section {section.name or index} links to section {link} "
                          f"(there are {header.shnum})")
            sections.append(section)
        return sections

    def _section_names(self, raw: list[tuple[int, ...]]) -> list[str]:
        index = self.header.shstrndx
        if index == 0:
            return [""] * len(raw)  # no name table: allowed, names are only for people
        _name, sh_type, _flags, _addr, offset, size = raw[index][:6]
        if sh_type != SHT_STRTAB:
            self.fail(f"section name table {index} is not a string table")
        table = self.view(offset, size, "the section name table")
        names = []
        for row in raw:
            end = table.find(b"\0", row[0])
            if row[0] >= len(table) or end < 0:
                self.fail(f"a section name lies outside the section name table ({row[0]:#x})")
            names.append(shown(table[row[0]:end].decode("utf-8", "replace")))
        return names
