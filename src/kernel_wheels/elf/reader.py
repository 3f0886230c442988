"""Reading what the checks need from an ELF shared object, in one pass over its tables.

Why not pyelftools for this: a torch-sized library has ~75,000 dynamic and ~530,000
static symbols, and walking them as Python objects takes seconds per walk (auditwheel
and abi3audit each walk them several times). The few tables the checks need (dynamic
section, dynamic symbols and their versions, the static symbol table's Python names) are
read here with ``struct`` over a memory map: the file is never copied into memory.

The file comes from whoever published the kernel, so it is read as hostile: before
anything is used, the frame is checked the way glibc's loader checks it and against
itself (``layout``: headers; ``mapping``: segments and sections; ``dynamic``:
the dynamic entries; ``symbols``, ``versions``: symbols, hashes, versions). A file
the loader would refuse, or that would crash it, or whose tables say one thing to the
checks and another to the loader, raises :class:`ElfError` with a one-line reason;
nothing else escapes (every loop is bounded by the file's size).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .. import data
from ..kernel.gpu_archs import GpuCode
from .dynamic import DT_FINI, DT_INIT, Dynamic, read_dynamic
from .fatbin import FATBIN_SECTIONS, LOADED_SECTION, device_code, read_fatbin
from .layout import (
    ELF_MAGIC,
    SHT_DYNSYM,
    SHT_GNU_HASH,
    SHT_HASH,
    SHT_SYMTAB,
    ElfError,
    Layout,
    shown,
)
from .mapping import check_relro, check_sections, check_segments
from .offload_bundle import HIP_SECTION, hip_device_code
from .symbols import (
    SHN_UNDEF,
    Row,
    SymbolTable,
    check_dynamic_symbols,
    check_entry_points,
    check_hash_tables,
    read_symbols,
    symbol_name,
)
from .versions import Versions, read_versions

__all__ = ["ELF_MAGIC", "ElfError", "ElfInfo", "PythonSymbol", "dynamic_symbols_mention", "read_elf",
           "read_elf_bytes"]

_STB_LOCAL, _STB_GNU_UNIQUE = 0, 10
_T = TypeVar("_T")
_PYTHON_PREFIXES = (b"Py", b"_Py")


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
    #: Defined dynamic symbols named PyInit_* (an extension module's entry point) or
    #: __tvm_ffi_* (the functions of a tvm-ffi library, which tvm_ffi.load_module calls).
    init_functions: frozenset[str]
    #: (symbol, "GLIBC_2.32") for every undefined dynamic symbol with a version.
    versioned_imports: tuple[tuple[str, str], ...]
    #: {library soname: {"GLIBC_2.14", ...}} from the version-needs table.
    version_needs: dict[str, frozenset[str]]
    #: Undefined dynamic symbols (for the manylinux policies' symbol blacklists).
    undefined: frozenset[str]
    #: Py*/_Py* symbols of the dynamic and static symbol tables (the limited-API audit).
    python_symbols: tuple[PythonSymbol, ...]
    #: The device code the runtime loads that holds a kernel: CUDA cubins and PTX
    #: (``.nv_fatbin``), HIP code objects (``.hip_fatbin``); None: the file has none.
    gpu_code: GpuCode | None = None
    #: Device code the file holds without a kernel in it (nvcc writes a cubin per
    #: ``-gencode`` even for host code): named in messages, never counted.
    kernel_less: GpuCode | None = None


def read_elf(path: Path, arcname: str) -> ElfInfo:
    """The facts the checks need from the ELF file at ``path`` (named ``arcname``)."""
    with _mapped(path) as buffer:
        return _guarded(_read, buffer, arcname)


def dynamic_symbols_mention(path: Path, fragment: bytes) -> bool:
    """Whether the name of any dynamic symbol of the ELF file at ``path`` holds
    ``fragment``, the file's frame checked as :func:`read_elf` checks it (the builder
    reads torch's C++ ABI this way: ``__cxx11`` is in libc10's names only with the new
    ABI)."""
    def mentions(layout: Layout, _name: str) -> bool:
        _checked_frame(layout)
        section = layout.first(SHT_DYNSYM)
        if section is None:
            return False
        table = read_symbols(layout, section)
        strings = table.strings
        return any(strings.find(fragment, row[0], strings.find(b"\0", row[0])) >= 0
                   for row in table.rows if row[0])

    with _mapped(path) as buffer:
        return _guarded(mentions, buffer, path.name)


@contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap | bytes]:
    """The file's bytes, mapped (never copied into memory)."""
    with path.open("rb") as stream:
        try:
            buffer: mmap.mmap | bytes = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            buffer = b""
        try:
            yield buffer
        finally:
            if isinstance(buffer, mmap.mmap):
                buffer.close()


def read_elf_bytes(content: bytes, arcname: str) -> ElfInfo:
    """:func:`read_elf` on a binary held in memory."""
    return _guarded(_read, content, arcname)


def _guarded(read: Callable[[Layout, str], _T], buffer: mmap.mmap | bytes, arcname: str) -> _T:
    try:
        return read(Layout(buffer, arcname), arcname)
    except (struct.error, LookupError, ValueError, ArithmeticError) as exc:
        # A check that forgot a bound: still a malformed file, never a traceback.
        reason = " ".join(str(exc).split())
        raise ElfError(f"{shown(arcname)} is a malformed ELF file ({reason})") from None


def _read(layout: Layout, arcname: str) -> ElfInfo:
    dynamic = _checked_frame(layout)
    dynsym, symtab = _symbol_tables(layout, dynamic)
    versions = read_versions(layout, dynamic, dynsym.rows if dynsym else [])
    # abi3audit's rule: in a GCC-built object STB_LOOS means STB_GNU_UNIQUE, a local kind.
    comment = layout.named(".comment") if layout.header.shstrndx else None
    gnu_unique_is_local = comment is not None and b"GCC" in layout.section_bytes(comment)
    python = [symbol for table in (dynsym, symtab) if table is not None
              for symbol in _python_symbols(layout, table, gnu_unique_is_local)]
    imports = _dynamic_imports(layout, dynsym, versions) if dynsym is not None else _Imports()
    return _info(arcname, layout, dynamic, versions, imports, python, _gpu_code(layout))


def _gpu_code(layout: Layout) -> tuple[GpuCode, GpuCode] | None:
    """(the device code with kernels, that without) of the CUDA fat binary and HIP offload
    bundle sections (all read as hostile; of CUDA's, only the one the runtime loads
    counts); None when the file has no such section."""
    found = None
    for section in layout.sections:
        if section.name not in (*FATBIN_SECTIONS, HIP_SECTION) or not section.in_file:
            continue
        layout.require_inside(section.offset, section.size, f"section {section.name}")
        start, end = section.offset, section.offset + section.size
        if section.name == HIP_SECTION:
            code = hip_device_code(layout.buf, layout.name, start, end)
        else:
            entries = read_fatbin(layout.buf, layout.name, start, end)
            if section.name != LOADED_SECTION:
                continue
            code = device_code(layout.buf, entries, layout.name)
        held, idle = found or (GpuCode(), GpuCode())
        found = held.union(code[0]), idle.union(code[1])
    if found is None:
        return None
    # code without a kernel in one section and with one in another holds a kernel
    return found[0], GpuCode(*(tuple(n for n in names if n not in found[0].names())
                               for names in (found[1].cubins, found[1].ptx, found[1].code_objects)))


def _checked_frame(layout: Layout) -> Dynamic:
    """Segments, sections and dynamic entries, checked against the file and each other."""
    check_segments(layout)
    check_sections(layout)
    dynamic = read_dynamic(layout)
    check_relro(layout, dynamic.bind_now)
    return dynamic


def _symbol_tables(layout: Layout, dynamic: Dynamic) -> tuple[SymbolTable | None, SymbolTable | None]:
    """(the dynamic symbols, the static symbols' Python ones), with the tables the loader
    looks symbols up through and the entry points it calls checked against them."""
    dynsym_section = layout.first(SHT_DYNSYM)
    dynsym = read_symbols(layout, dynsym_section) if dynsym_section is not None else None
    if dynsym is not None:
        check_dynamic_symbols(layout, dynsym)
    check_hash_tables(layout, layout.first(SHT_HASH), layout.first(SHT_GNU_HASH),
                      len(dynsym.rows) if dynsym else 0)
    symtab_section = layout.first(SHT_SYMTAB)
    symtab = read_symbols(layout, symtab_section, python_only=True) if symtab_section else None
    entry_points = {name: dynamic.values[tag] for name, tag in ((".init", DT_INIT), (".fini", DT_FINI))
                    if tag in dynamic.values}
    check_entry_points(layout, entry_points, [t for t in (dynsym, symtab) if t is not None])
    return dynsym, symtab


@dataclass(frozen=True)
class _Imports:
    init_functions: frozenset[str] = frozenset()
    undefined: frozenset[str] = frozenset()
    versioned: tuple[tuple[str, str], ...] = ()


def _dynamic_imports(layout: Layout, table: SymbolTable, versions: Versions) -> _Imports:
    init_functions: set[str] = set()
    undefined: set[str] = set()
    versioned: list[tuple[str, str]] = []
    indexes = versions.symbol_indexes
    for st_name, _bind, _type, shndx, position in table.rows:
        if not st_name:
            continue
        if shndx == SHN_UNDEF:
            name = symbol_name(layout, table, st_name)
            undefined.add(name)
            if indexes and indexes[position] in versions.needed_names:
                versioned.append((name, versions.needed_names[indexes[position]]))
        elif table.strings.startswith((b"PyInit_", b"__tvm_ffi_"), st_name):
            # what a loader calls: Python's import, or tvm_ffi.load_module
            init_functions.add(symbol_name(layout, table, st_name))
    return _Imports(frozenset(init_functions), frozenset(undefined), tuple(versioned))


def _python_symbols(layout: Layout, table: SymbolTable, gnu_unique_is_local: bool) -> list[PythonSymbol]:
    found = []
    rows: list[Row] = table.rows
    for st_name, bind, _type, shndx, _position in rows:
        if st_name and table.strings.startswith(_PYTHON_PREFIXES, st_name):
            local = bind == _STB_LOCAL or (bind == _STB_GNU_UNIQUE and gnu_unique_is_local)
            found.append(PythonSymbol(symbol_name(layout, table, st_name), local, shndx != SHN_UNDEF))
    return found


def _info(arcname: str, layout: Layout, dynamic: Dynamic, versions: Versions, imports: _Imports,
          python: list[PythonSymbol], gpu_code: tuple[GpuCode, GpuCode] | None) -> ElfInfo:
    machines = {number: name for name, number in data.load("binaries")["elf_machine_numbers"].items()}
    machine = layout.header.machine
    return ElfInfo(
        arcname=arcname,
        machine=machines.get(machine, f"EM_{machine}"),
        needed=dynamic.needed,
        rpaths=dynamic.rpaths,
        soname=dynamic.soname,
        init_functions=imports.init_functions,
        versioned_imports=imports.versioned,
        version_needs=versions.needs,
        undefined=imports.undefined,
        python_symbols=tuple(python),
        gpu_code=gpu_code[0] if gpu_code else None,
        kernel_less=gpu_code[1] if gpu_code else None,
    )
