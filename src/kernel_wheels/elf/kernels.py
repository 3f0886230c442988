"""Whether a piece of device code holds a kernel: a cubin, a PTX module or a HIP code
object. A GPU architecture counts only where some code for it holds one: nvcc writes a
cubin (and PTX) for every ``-gencode`` of a ``.cu`` file even when the file holds host
code only, and such a cubin runs nothing ("no kernel image is available" at the call).

- A cubin is an ELF file (``EM_CUDA``, 190). A kernel is a defined ``STT_FUNC`` symbol
  whose ``st_other`` carries ``STO_CUDA_ENTRY`` (0x10): the flag NVIDIA's ``nvdisasm``
  prints as ``.other <name>, @"STO_CUDA_ENTRY STV_DEFAULT"`` and cuda-gdb reads as a
  kernel's entry. nvcc 13 (checked here) sets it on every ``__global__`` function, also in
  ``-rdc`` builds and for ``sm_90a``/``sm_100f``; a device function (``__device__``) is an
  ``STT_FUNC`` without it. Section names do not tell them apart: a device function kept
  by ``-rdc`` has its ``.text.<name>`` and ``.nv.info.<name>`` sections like a kernel
  (the tests check the flag against PTX's ``.entry`` and those sections).
- PTX is text; a kernel is an ``.entry`` directive (``.visible .entry name(``), a device
  function a ``.func``.
- A HIP code object is an ELF file (``EM_AMDGPU``, 224). A kernel has a kernel
  descriptor, a defined ``STT_OBJECT`` symbol named ``<kernel>.kd`` (LLVM's AMDGPUUsage,
  "Kernel Descriptor"; code object v3 and later), or in code object v2 an
  ``STT_AMDGPU_HSA_KERNEL`` (10) symbol. Both symbol tables are read: a code object may
  be stripped of ``.symtab`` but keeps ``.dynsym``, which the loader reads.

The bytes come from whoever published the kernel: every offset and count is checked
against the code's own size before it is used, and the walk is bounded by that size;
anything malformed raises :class:`DeviceCodeError`.
"""

from __future__ import annotations

import mmap
import re
import struct

from .layout import ElfError

__all__ = ["EM_AMDGPU", "EM_CUDA", "DeviceCodeError", "elf_holds_kernel", "ptx_holds_kernel"]

EM_CUDA, EM_AMDGPU = 190, 224
STO_CUDA_ENTRY = 0x10
_STT_OBJECT, _STT_FUNC, _STT_AMDGPU_HSA_KERNEL = 1, 2, 10
_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_MACHINES = {EM_CUDA: "a CUDA cubin", EM_AMDGPU: "an AMD GPU code object"}
#: (section header size, symbol size, header format, section header format, symbol format)
_CLASSES = {
    1: (40, 16, struct.Struct("<16sHHIIIIIHHHHHH"), struct.Struct("<IIIIIIIIII"),
        struct.Struct("<IIIBBH")),
    2: (64, 24, struct.Struct("<16sHHIQQQIHHHHHH"), struct.Struct("<IIQQQQIIQQ"),
        struct.Struct("<IBBHQQ")),
}
#: A kernel's definition in PTX: ``.entry``, perhaps after ``.visible`` or ``.weak``, at the
#: start of a line (``.extern .entry`` declares one defined elsewhere: not a kernel here).
_PTX_ENTRY = re.compile(rb"^[ \t]*(?:\.(?:visible|weak)[ \t]+)*\.entry[ \t\r\n(]", re.MULTILINE)

Buffer = bytes | mmap.mmap


class DeviceCodeError(ElfError):
    """Device code that is not what its container says (one line)."""


def ptx_holds_kernel(buffer: Buffer, start: int, end: int) -> bool:
    """Whether the PTX text in ``buffer[start:end]`` defines a kernel (an ``.entry``)."""
    return _PTX_ENTRY.search(buffer, start, end) is not None


def elf_holds_kernel(buffer: Buffer, start: int, end: int, machine: int, what: str) -> bool:
    """Whether the device ELF file (a cubin or a code object) in ``buffer[start:end]``
    defines a kernel (this module's docstring). ``what`` names it in an error."""
    size = end - start
    if size < 64 or buffer[start:start + 4] != b"\x7fELF":
        raise DeviceCodeError(f"{what} is no ELF file")
    elf_class, encoding = buffer[start + 4], buffer[start + 5]
    if elf_class not in _CLASSES or encoding != 1:
        raise DeviceCodeError(f"{what} is an ELF file of class {elf_class}, encoding {encoding}, "
                              "which no GPU compiler writes")
    section_size, symbol_size, header, section, _ = _CLASSES[elf_class]
    (_ident, _type, e_machine, _version, _entry, _phoff, shoff, _flags, _ehsize, _phentsize,
     _phnum, shentsize, shnum, _shstrndx) = header.unpack_from(buffer, start)
    if e_machine != machine:
        raise DeviceCodeError(f"{what} is not {_MACHINES.get(machine, 'device code')} "
                              f"(its ELF header names machine {e_machine})")
    if shnum and (shentsize < section_size or shoff > size or shnum > (size - shoff) // shentsize):
        raise DeviceCodeError(f"{what} has a section header table outside its {size} bytes")
    sections = [section.unpack_from(buffer, start + shoff + i * shentsize) for i in range(shnum)]
    for _name, sh_type, _f, _a, offset, length, link, _info, _align, entsize in sections:
        if sh_type not in (_SHT_SYMTAB, _SHT_DYNSYM) or length == 0:
            continue
        if entsize != symbol_size or offset > size or length > size - offset or link >= shnum:
            raise DeviceCodeError(f"{what} has a symbol table outside its {size} bytes")
        strings = sections[link]
        str_offset, str_length = strings[4], strings[5]
        if str_offset > size or str_length > size - str_offset:
            raise DeviceCodeError(f"{what} has a string table outside its {size} bytes")
        table = (start + offset, length // entsize, start + str_offset, start + str_offset + str_length)
        if _table_holds_kernel(buffer, elf_class, table, machine, what):
            return True
    return False


def _table_holds_kernel(buffer: Buffer, elf_class: int, table: tuple[int, int, int, int],
                        machine: int, what: str) -> bool:
    first, count, strings, strings_end = table
    symbol_size, symbol = _CLASSES[elf_class][1], _CLASSES[elf_class][4]
    for index in range(count):
        fields = symbol.unpack_from(buffer, first + index * symbol_size)
        if elf_class == 1:
            st_name, _value, _size, st_info, st_other, st_shndx = fields
        else:
            st_name, st_info, st_other, st_shndx, _value, _size = fields
        kind = st_info & 0xF
        if st_shndx == 0:  # undefined: defined elsewhere, not here
            continue
        if machine == EM_CUDA:
            if kind == _STT_FUNC and st_other & STO_CUDA_ENTRY:
                return True
        elif kind == _STT_AMDGPU_HSA_KERNEL or (kind == _STT_OBJECT and _name_ends(
                buffer, strings + st_name, strings_end, b".kd", what)):
            return True
    return False


def _name_ends(buffer: Buffer, at: int, end: int, suffix: bytes, what: str) -> bool:
    terminator = buffer.find(b"\0", at, end) if at < end else -1
    if terminator < 0:
        raise DeviceCodeError(f"{what} has a symbol name outside its string table")
    return buffer[terminator - len(suffix):terminator] == suffix and terminator - len(suffix) >= at
