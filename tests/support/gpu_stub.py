"""A stand-in for a CUDA build made from a real host binary: a copy of it with a
``.nv_fatbin`` section whose fat binary lists cubins and PTX for the given
architectures, each holding one kernel: the cubins are minimal ELF files made here (a
symbol table with one ``STT_FUNC`` marked ``STO_CUDA_ENTRY``, all ``kernel-wheels
check`` reads of a cubin), the PTX one ``.entry``. For fixtures that fake CUDA variants
with the sample's CPU extension: since issue #32, ``check`` fails a CUDA build whose
binaries hold no kernel. For a ROCm build (``gfx90a`` names) likewise a ``.hip_fatbin``
offload bundle of minimal code objects (``EM_AMDGPU``, one ``k.kd`` kernel descriptor
symbol). Real nvcc and clang builds are tests/test_gpu_archs.py's and
tests/test_gpu_kernels.py's."""

from __future__ import annotations

import struct
import subprocess
import tempfile
from pathlib import Path

_KIND = {"sm": 2, "compute": 1}


def stand_in_cubin(machine: int = 190) -> bytes:
    """An ELF file of machine EM_CUDA (190) whose symbol table defines one kernel, ``k``;
    of machine EM_AMDGPU (224), one kernel descriptor, ``k.kd``."""
    name = b"k" if machine == 190 else b"k.kd"
    strtab, shstrtab = b"\0" + name + b"\0", b"\0.strtab\0.symtab\0.shstrtab\0"
    # GLOBAL FUNC with STO_CUDA_ENTRY; GLOBAL OBJECT (a kernel descriptor)
    info, other = (0x12, 0x10) if machine == 190 else (0x11, 0)
    symtab = bytes(24) + struct.pack("<IBBHQQ", 1, info, other, 1, 0, 64)
    data = strtab + symtab + shstrtab
    shoff = 64 + len(data) + (-len(data) % 8)
    header = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01\x41" + bytes(8), 2, machine, 1, 0, 0,
                         shoff, 0x5005004, 64, 0, 0, 64, 4, 3)
    sections = [bytes(64),
                struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, 64, len(strtab), 0, 0, 1, 0),
                struct.pack("<IIQQQQIIQQ", 9, 2, 0, 0, 64 + len(strtab), len(symtab), 1, 1, 8, 24),
                struct.pack("<IIQQQQIIQQ", 17, 3, 0, 0, 64 + len(strtab) + len(symtab), len(shstrtab),
                            0, 0, 1, 0)]
    return header + data + bytes(shoff - 64 - len(data)) + b"".join(sections)


_PTX = b".version 9.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n"


def fatbin(names: tuple[str, ...]) -> bytes:
    """A fat binary container with one entry holding a kernel per ``sm_80`` / ``compute_90`` name."""
    body = b""
    for name in names:
        prefix, number = name.split("_")
        kind = _KIND[prefix]
        payload = stand_in_cubin() if kind == 2 else _PTX
        payload += bytes(-len(payload) % 8)
        body += struct.pack("<HHIQIIIIIIQQQ", kind, 0x101, 64, len(payload), 0, 0,
                            0x10008 if kind == 2 else 0x90000, int(number), 0, 0, 0x11, 0, 0) + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def offload_bundle(targets: tuple[str, ...]) -> bytes:
    """A clang offload bundle: the host's empty entry and one code object per target ID."""
    ids = [b"host-x86_64-unknown-linux--", *(f"hipv4-amdgcn-amd-amdhsa--{t}".encode() for t in targets)]
    code = stand_in_cubin(224)
    header_size = 24 + 8 + sum(24 + len(i) for i in ids)
    table, offset = b"", header_size
    for index, bundle_id in enumerate(ids):
        size = 0 if index == 0 else len(code)
        table += struct.pack("<QQQ", offset, size, len(bundle_id)) + bundle_id
        offset += size
    return b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids)) + table + code * len(targets)


def with_device_code(binary: Path, target: Path,
                     names: tuple[str, ...] = ("sm_80", "sm_90", "compute_90")) -> Path:
    """``binary`` copied to ``target`` with a fat binary for ``names`` (default: what the
    fixtures' metadata.json claims, 8.0 and 9.0+PTX), or an offload bundle for AMD target
    IDs (``("gfx90a",)``)."""
    section = ".hip_fatbin" if names[0].startswith("gfx") else ".nv_fatbin"
    with tempfile.TemporaryDirectory() as scratch:
        blob = Path(scratch) / "fatbin"
        blob.write_bytes(offload_bundle(names) if section == ".hip_fatbin" else fatbin(names))
        return add_section(binary, target, section, blob)


def add_section(binary: Path, target: Path, section: str, blob: Path) -> Path:
    """``binary`` copied to ``target`` (the same path: in place) with the file ``blob`` as
    ``section`` (``.nv_fatbin``, ``.hip_fatbin``), as objcopy adds it; for real device
    code, ``blob`` from :func:`support.gpu_builds.nvcc_fatbin` or
    :func:`support.gpu_builds.clang_hip_bundle` (the benchmark's GPU variants)."""
    subprocess.run(["objcopy", "--add-section", f"{section}={blob}", "--set-section-flags",
                    f"{section}=readonly,data", str(binary), str(target)], check=True,
                   capture_output=True)
    return target
