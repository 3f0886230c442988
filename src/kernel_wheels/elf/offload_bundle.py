"""The HIP code objects of an ELF file (a ROCm build): which AMD GPUs its device code runs
on, read without a GPU or ROCm.

clang (``hipcc``, ``--offload-arch=gfx942``) puts a HIP shared object's device code into
the section ``.hip_fatbin``: one *clang offload bundle* per compiled file, each starting
on a 4096-byte boundary (zero bytes between). A bundle (LLVM's
``clang/lib/Driver/OffloadBundler.cpp``)::

    "__CLANG_OFFLOAD_BUNDLE__", u64 number of entries,
    per entry: u64 offset (from the bundle's start), u64 size, u64 ID size, the ID

and the entries' bytes at their offsets. An ID is ``<kind>-<triple>-<target ID>``: the
host's ``host-x86_64-unknown-linux--`` (empty), and one code object per GPU,
``hipv4-amdgcn-amd-amdhsa--gfx90a`` or ``hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-``
(``hip-amdgcn-amd-amdhsa-gfx906`` from older compilers). ``--offload-compress`` writes
the bundle compressed instead::

    "CCOB", u16 version, u16 method (0 zlib, 1 zstd),
    v1: u32 inflated size, u64 hash; v2: u32 total size, u32 inflated size, u64 hash;
    v3: u64 total size, u64 inflated size, u64 hash; then the compressed bundle

(inflated within bounds, :mod:`~kernel_wheels.elf.inflate`). A code object is an ELF
file of its own; a target counts only where one of its code objects holds a kernel
(:mod:`~kernel_wheels.elf.kernels`). Entries of other kinds (OpenMP, SPIR-V) run nothing
here and are not counted.

The file comes from whoever published the kernel: every size is checked against the
section before it is used, the walk only moves forward, and a hostile section gives
:class:`OffloadBundleError` (an :class:`~kernel_wheels.elf.layout.ElfError`) or a result,
in time and memory bounded by its size and the inflation bounds.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..kernel.gpu_archs import GpuCode, parse_amd_target, sort_target_ids
from .kernels import EM_AMDGPU, elf_holds_kernel
from .layout import ElfError

if TYPE_CHECKING:
    from .inflate import Budget

__all__ = ["BUNDLE_MAGIC", "COMPRESSED_MAGIC", "HIP_SECTION", "BundleEntry", "OffloadBundleError",
           "hip_device_code", "read_bundles"]

HIP_SECTION = ".hip_fatbin"
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
_METHODS = {0: "zlib", 1: "zstd"}
#: Compressed header after magic, version and method: (fields, has a total size)
_COMPRESSED = {1: (struct.Struct("<IQ"), False), 2: (struct.Struct("<IIQ"), True),
               3: (struct.Struct("<QQQ"), True)}
_ALIGNMENT = 8  # bundles start aligned (4096 as clang writes them); zero bytes between
_HIP_ID = re.compile(r"(?:hipv4|hip)-amdgcn-amd-amdhsa-?-(.+)")
_MAX_ID = 1024  # bytes: an ID is a kind, a triple and a target ID


Buffer = bytes | mmap.mmap


class OffloadBundleError(ElfError):
    """The ``.hip_fatbin`` section is malformed (one line, naming the file)."""


@dataclass(frozen=True)
class BundleEntry:
    """One entry of an offload bundle."""

    bundle_id: str  # "hipv4-amdgcn-amd-amdhsa--gfx90a"
    target: str | None  # "gfx90a": a HIP code object's target ID; None for other kinds
    compression: str | None  # the bundle's: None, "zlib" or "zstd"
    kernels: bool  # holds a kernel (False for entries that are not code objects)


def hip_device_code(buffer: Buffer, name: str, start: int = 0,
                    end: int | None = None) -> tuple[GpuCode, GpuCode]:
    """(the targets whose code objects hold a kernel, those whose hold none) of the
    ``.hip_fatbin`` section ``buffer[start:end]`` of the ELF file ``name``."""
    entries = read_bundles(buffer, name, start, end)
    with_kernels = {e.target for e in entries if e.target is not None and e.kernels}
    without = {e.target for e in entries if e.target is not None} - with_kernels
    return (GpuCode(code_objects=sort_target_ids(with_kernels)),
            GpuCode(code_objects=sort_target_ids(without)))


def read_bundles(buffer: Buffer, name: str, start: int = 0,
                 end: int | None = None) -> tuple[BundleEntry, ...]:
    """The entries of the offload bundles in ``buffer[start:end]``, in file order. A
    target's code objects are looked into until one shows a kernel."""
    end = len(buffer) if end is None else end
    if not 0 <= start <= end <= len(buffer):
        raise OffloadBundleError(f"{name}: its {HIP_SECTION} section lies outside the file")
    from .inflate import Budget

    entries: list[BundleEntry] = []
    found: set[str] = set()  # targets already shown to hold a kernel
    budget = Budget()
    offset = start
    while offset < end:
        head = bytes(buffer[offset:offset + len(BUNDLE_MAGIC)])
        if head == BUNDLE_MAGIC:
            bundle, offset = _bundle(buffer, offset, end, name, None, found)
        elif head.startswith(COMPRESSED_MAGIC):
            bundle, offset = _compressed(buffer, offset, end, name, found, budget)
        else:
            following = min(end, start + ((offset - start) // _ALIGNMENT + 1) * _ALIGNMENT)
            if any(bytes(buffer[offset:following])):
                raise OffloadBundleError(f"{name}: no offload bundle at byte {offset - start:#x} of "
                                         f"its {HIP_SECTION} section")
            offset = following
            continue
        entries += bundle
    return tuple(entries)


def _bundle(buffer: Buffer, start: int, end: int, name: str, compression: str | None,
            found: set[str]) -> tuple[list[BundleEntry], int]:
    """The bundle at ``buffer[start:]`` (ending by ``end``) and where it ends."""
    where = "a compressed offload bundle" if compression else "an offload bundle"
    header = start + len(BUNDLE_MAGIC) + 8
    if header > end:
        raise OffloadBundleError(f"{name}: {where} ends inside its header")
    count: int = struct.unpack_from("<Q", buffer, header - 8)[0]
    if count > (end - header) // 24:
        raise OffloadBundleError(f"{name}: {where} says {count} entries, more than its "
                                 f"{end - start} bytes can hold")
    listed: list[tuple[str, int, int]] = []
    cursor, bundle_end = header, header
    for _ in range(count):
        if cursor + 24 > end:
            raise OffloadBundleError(f"{name}: {where} ends inside its list of entries")
        offset, size, id_size = struct.unpack_from("<QQQ", buffer, cursor)
        cursor += 24
        if id_size > min(_MAX_ID, end - cursor):
            raise OffloadBundleError(f"{name}: an entry of {where} has a {id_size}-byte ID")
        raw_id = bytes(buffer[cursor:cursor + id_size])
        cursor += id_size
        if offset > end - start or size > end - start - offset:
            raise OffloadBundleError(f"{name}: an entry of {where} ({size} bytes at {offset}) lies "
                                     "past its end")
        try:
            bundle_id = raw_id.decode("ascii")
        except UnicodeDecodeError:
            raise OffloadBundleError(f"{name}: an entry of {where} has an ID that is not ASCII") from None
        listed.append((bundle_id, start + offset, size))
        bundle_end = max(bundle_end, cursor, start + offset + size)
    entries = [_entry(buffer, bundle_id, at, size, name, compression, found)
               for bundle_id, at, size in listed]
    return entries, bundle_end


def _entry(buffer: Buffer, bundle_id: str, at: int, size: int, name: str, compression: str | None,
           found: set[str]) -> BundleEntry:
    match = _HIP_ID.fullmatch(bundle_id)
    if match is None:
        return BundleEntry(bundle_id, None, compression, False)
    target = parse_amd_target(match[1])
    if target is None:
        raise OffloadBundleError(f"{name}: its offload bundle holds {_shown(bundle_id)}, whose "
                                 "target is no AMD GPU target ID")
    if target.name in found:
        return BundleEntry(bundle_id, target.name, compression, True)
    kernels = size > 0 and elf_holds_kernel(buffer, at, at + size, EM_AMDGPU,
                                           f"{name}: its {target.name} code object")
    if kernels:
        found.add(target.name)
    return BundleEntry(bundle_id, target.name, compression, kernels)


def _compressed(buffer: Buffer, start: int, end: int, name: str, found: set[str],
                budget: Budget) -> tuple[list[BundleEntry], int]:
    from .inflate import inflate, inflate_prefix  # the compression libraries load only when needed

    if start + 8 > end:
        raise OffloadBundleError(f"{name}: a compressed offload bundle ends inside its header")
    version, method = struct.unpack_from("<HH", buffer, start + 4)
    if version not in _COMPRESSED or method not in _METHODS:
        raise OffloadBundleError(f"{name}: a compressed offload bundle of version {version}, "
                                 f"method {method}, is not one clang writes")
    fields, has_total = _COMPRESSED[version]
    body = start + 8 + fields.size
    if body > end:
        raise OffloadBundleError(f"{name}: a compressed offload bundle ends inside its header")
    values = fields.unpack_from(buffer, start + 8)
    what = f"{name}: a compressed offload bundle"
    budget.spend(values[1] if has_total else values[0], what)
    if has_total:
        total, inflated = values[0], values[1]
        if not body - start <= total <= end - start:
            raise OffloadBundleError(f"{what} says {total} bytes, past the end of its section")
        data = inflate(bytes(buffer[body:start + total]), _METHODS[method], inflated, what)
        bundle_end = start + total
    else:  # version 1 says no total size: the compressed stream marks its own end
        data, used = inflate_prefix(bytes(buffer[body:end]), _METHODS[method], values[0], what)
        bundle_end = body + used
    if not data.startswith(BUNDLE_MAGIC):
        raise OffloadBundleError(f"{what} does not inflate to an offload bundle")
    entries, _ = _bundle(data, 0, len(data), name, _METHODS[method], found)
    return entries, bundle_end


def _shown(value: str) -> str:
    return repr(value[:80])
