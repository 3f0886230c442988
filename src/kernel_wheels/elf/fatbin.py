"""The CUDA fat binary of an ELF file: which GPUs its device code runs on, read without
a GPU, a driver or the CUDA toolkit.

nvcc puts the device code of a shared object into the section ``.nv_fatbin`` (and the
inputs of a later device link into ``__nv_relfatbin``, which the runtime never loads).
The section holds fat binary containers one after the other, each a 16-byte header::

    u32 magic 0xBA55ED50, u16 version 1, u16 header size, u64 size of the entries

followed by entries, each a header of at least 64 bytes and its payload::

    u16 kind (1 PTX, 2 cubin, 8 LTO-IR), u16 version, u32 header size,
    u64 payload size (padded), u32 compressed size, u32 -, u32 version (minor, major),
    u32 architecture (80 = 8.0, 90 = 9.0, 100 = 10.0, 121 = 12.1),
    u32 name offset, u32 name size, u64 flags, u64 -, u64 uncompressed size

The flags say 64-bit (0x1), Linux (0x10), compressed with LZ4 (0x2000, nvcc 13's
``-compress-mode=speed``) or with zstd (0x8000, its default, which also compresses
every PTX entry), architecture-specific code (0x100000: ``sm_90a``) and family code
(0x200000: ``sm_100f``). The architecture is in the header whether or not the payload
is compressed: a compressed cubin for sm_80 says 80 like a plain one (checked against the
ELF header of the cubin itself in the tests, built with nvcc 13).

An architecture counts only where an entry for it holds a kernel (:func:`device_code`,
:mod:`~kernel_wheels.elf.kernels`): nvcc writes a cubin per ``-gencode`` even for host
code. So the payloads are read: a plain one in place, a compressed one inflated within
bounds (:mod:`~kernel_wheels.elf.inflate`), and only until each architecture has shown
one kernel.

The file comes from whoever published the kernel: every size is checked against the
section before it is used, the walk only moves forward, and nothing is copied, so a
hostile section gives :class:`FatbinError` (an :class:`~kernel_wheels.elf.layout.ElfError`)
or a result, in time and memory bounded by its size.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..kernel.gpu_archs import GpuCode, sort_code_names
from .kernels import EM_CUDA, elf_holds_kernel, ptx_holds_kernel
from .layout import ElfError

if TYPE_CHECKING:
    from .inflate import Budget

__all__ = ["FATBIN_MAGIC", "FATBIN_SECTIONS", "FatbinEntry", "FatbinError", "device_code", "gpu_code",
           "read_fatbin"]

FATBIN_MAGIC = 0xBA55ED50
#: The sections nvcc writes fat binaries into: the one the CUDA runtime loads, and the
#: one a later device link (``nvcc -dlink``) reads.
LOADED_SECTION, RELOCATABLE_SECTION = ".nv_fatbin", "__nv_relfatbin"
FATBIN_SECTIONS = (LOADED_SECTION, RELOCATABLE_SECTION)

KIND_PTX, KIND_CUBIN, KIND_LTO_IR = 1, 2, 8
_RUNNABLE = ("cubin", "ptx")
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIIIIIQQQ")
_ALIGNMENT = 8  # containers start 8-byte aligned; zero bytes may pad between them
#: Architectures nvcc has ever had run from 1.0 (10) to 12.1 (121); a number far above
#: is no architecture, and would print as one to a user.
_MAX_ARCH = 999


class FatbinError(ElfError):
    """The fat binary is malformed (one line, naming the file)."""


@dataclass(frozen=True)
class FatbinEntry:
    """One entry of a fat binary."""

    kind: str  # "cubin", "ptx", "lto-ir" or "kind-<n>"
    arch: int  # 90 for 9.0, 100 for 10.0
    suffix: str  # "", "a" (architecture-specific) or "f" (family)
    compression: str | None  # None, "lz4" or "zstd"
    payload: int = 0  # where its payload starts in the file
    stored: int = 0  # the payload's bytes as stored (compressed or not)
    inflated: int = 0  # compressed: the bytes it inflates to, as its header says

    @property
    def name(self) -> str:
        """``sm_90a`` for a cubin, ``compute_90`` for PTX (nvcc's spelling,
        :mod:`kernel_wheels.kernel.gpu_archs`)."""
        prefix = "sm" if self.kind == "cubin" else "compute" if self.kind == "ptx" else self.kind
        return f"{prefix}_{self.arch}{self.suffix}"


def gpu_code(entries: tuple[FatbinEntry, ...]) -> GpuCode:
    """The cubins and PTX among ``entries`` (LTO-IR and unknown kinds run on no GPU),
    whether or not they hold a kernel."""
    return _named(e.name for e in entries if e.kind in _RUNNABLE)


def device_code(buffer: bytes | mmap.mmap, entries: tuple[FatbinEntry, ...],
                name: str) -> tuple[GpuCode, GpuCode]:
    """(the cubins and PTX that hold a kernel, those that hold none) among ``entries``
    of ``buffer``: a name is looked into until one of its entries shows a kernel."""
    from .inflate import Budget

    with_kernels: set[str] = set()
    budget = Budget()
    for entry in entries:
        if entry.kind in _RUNNABLE and entry.name not in with_kernels \
                and _holds_kernel(buffer, entry, name, budget):
            with_kernels.add(entry.name)
    without = {e.name for e in entries if e.kind in _RUNNABLE} - with_kernels
    return _named(with_kernels), _named(without)


def _named(names: Iterable[str]) -> GpuCode:
    names = list(names)
    return GpuCode(sort_code_names(n for n in names if n.startswith("sm_")),
                   sort_code_names(n for n in names if n.startswith("compute_")))


def _holds_kernel(buffer: bytes | mmap.mmap, entry: FatbinEntry, name: str, budget: Budget) -> bool:
    what = f"{name}: the {entry.name} {'cubin' if entry.kind == 'cubin' else 'PTX'} of its fat binary"
    start, end = entry.payload, entry.payload + entry.stored
    if entry.compression is not None:
        from .inflate import inflate  # the compression libraries load only when needed

        budget.spend(entry.inflated, what)
        data: bytes | mmap.mmap = inflate(bytes(buffer[start:end]), entry.compression, entry.inflated,
                                          what)
        start, end = 0, len(data)
    else:
        data = buffer
    if entry.kind == "ptx":
        return ptx_holds_kernel(data, start, end)
    return elf_holds_kernel(data, start, end, EM_CUDA, what)


def read_fatbin(buffer: bytes | mmap.mmap, name: str, start: int = 0,
                end: int | None = None) -> tuple[FatbinEntry, ...]:
    """The entries of the fat binary containers in ``buffer[start:end]`` (a section of the
    ELF file ``name``), in file order. Raises :class:`FatbinError` for anything else."""
    end = len(buffer) if end is None else end
    if not 0 <= start <= end <= len(buffer):
        raise FatbinError(f"{name}: its fat binary lies outside the file")
    entries: list[FatbinEntry] = []
    offset = start
    while offset < end:
        if offset + 4 > end or _u32(buffer, offset) != FATBIN_MAGIC:
            padding = (-(offset - start)) % _ALIGNMENT or _ALIGNMENT
            if offset + padding > end or any(buffer[offset:offset + padding]):
                raise FatbinError(f"{name}: no fat binary container at byte {offset - start:#x} "
                                  "of its fat binary section")
            offset += padding
            continue
        if offset + _CONTAINER.size > end:
            raise FatbinError(f"{name}: its fat binary section ends inside a container header")
        _magic, version, header_size, size = _CONTAINER.unpack_from(buffer, offset)
        if version != 1 or header_size < _CONTAINER.size:
            raise FatbinError(f"{name}: fat binary container version {version} with a "
                              f"{header_size}-byte header is not one nvcc writes")
        body, body_end = offset + header_size, offset + header_size + size
        if body_end > end:
            raise FatbinError(f"{name}: a fat binary container says {size} bytes, past the end "
                              "of its section")
        while body < body_end:
            entry, body = _entry(buffer, body, body_end, name)
            entries.append(entry)
        offset = body_end
    return tuple(entries)


def _u32(buffer: bytes | mmap.mmap, offset: int) -> int:
    value: int = struct.unpack_from("<I", buffer, offset)[0]
    return value


def _entry(buffer: bytes | mmap.mmap, offset: int, end: int, name: str) -> tuple[FatbinEntry, int]:
    if offset + _ENTRY.size > end:
        raise FatbinError(f"{name}: a fat binary container ends inside an entry header")
    (kind, _version, header_size, payload, compressed_size, _unknown, _code_version, arch,
     _name_offset, _name_size, flags, _reserved, uncompressed) = _ENTRY.unpack_from(buffer, offset)
    following = offset + header_size + payload
    if header_size < _ENTRY.size or following > end:
        raise FatbinError(f"{name}: a fat binary entry ({header_size}-byte header, {payload}-byte "
                          "payload) does not fit its container")
    kinds = {KIND_PTX: "ptx", KIND_CUBIN: "cubin", KIND_LTO_IR: "lto-ir"}
    what = kinds.get(kind, f"kind-{kind}")
    if not 10 <= arch <= _MAX_ARCH:
        raise FatbinError(f"{name}: a fat binary entry names architecture {arch}, which does "
                          "not exist")
    if flags & FLAG_ARCH_SPECIFIC and flags & FLAG_FAMILY:
        raise FatbinError(f"{name}: a fat binary entry for {arch} is marked both "
                          "architecture-specific and family code")
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    compression = None
    stored, inflated = payload, 0
    if flags & (FLAG_LZ4 | FLAG_ZSTD):
        if flags & FLAG_LZ4 and flags & FLAG_ZSTD:
            raise FatbinError(f"{name}: a fat binary entry for {arch} is marked compressed "
                              "with both LZ4 and zstd")
        compression = "lz4" if flags & FLAG_LZ4 else "zstd"
        if not 0 < compressed_size <= payload or uncompressed == 0:
            raise FatbinError(f"{name}: a compressed fat binary entry for {arch} says "
                              f"{compressed_size} compressed bytes in a {payload}-byte payload")
        stored, inflated = compressed_size, uncompressed
    return FatbinEntry(what, arch, suffix, compression, offset + header_size, stored, inflated), following
