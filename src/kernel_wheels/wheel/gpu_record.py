"""``<dist-info>/kernel_wheels_gpu.json``: the GPU device code a wheel's binaries hold
(only code that holds a kernel: CUDA cubins and PTX, HIP code objects), so that an index
and ``install`` learn which GPUs a wheel runs on without unpacking its binaries. Written
after the binaries (a derived member: they may still be arriving when the wheel starts),
read back from them, never from metadata.json, with reproducible bytes (sorted keys, no
clock). ``check`` compares it with the binaries.

The document::

    {"cubins": ["sm_80", "sm_90"], "ptx": ["compute_90"],
     "binaries": {"<arcname>": {"cubins": [...], "ptx": [...]}}}

and for a ROCm build ``"code_objects": ["gfx90a", "gfx942"]`` beside them (a key only
present when there are some, so a CUDA build's record reads as before).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..kernel.gpu_archs import GpuCode, parse_amd_target, parse_code_name, sort_code_names, sort_target_ids
from ..reading import NestingError, parse_json

GPU_RECORD = "kernel_wheels_gpu.json"
_NAME_KINDS = {"cubins": "sm", "ptx": "compute", "code_objects": "gfx"}
MAX_RECORD = 1 << 20  # bytes; a record larger than this is not read
_MAX_NAMES = 64  # nvcc knows about 20 architectures; a record listing more is not one


def record_document(binaries: Sequence[tuple[str, GpuCode]]) -> dict[str, Any]:
    total = GpuCode()
    for _, code in binaries:
        total = total.union(code)
    return {**total.to_dict(), "binaries": {name: code.to_dict() for name, code in sorted(binaries)}}


def record_bytes(binaries: Sequence[tuple[str, GpuCode]]) -> bytes:
    return (json.dumps(record_document(binaries), indent=2, sort_keys=True) + "\n").encode()


def binaries_code(binaries: Sequence[tuple[str, Path]]) -> list[tuple[str, GpuCode]]:
    """The device code of each ELF binary that has a fat binary (a malformed one is left
    out here: ``check`` fails the wheel for it)."""
    from ..elf.reader import ELF_MAGIC, ElfError, read_elf

    found = []
    for arcname, path in binaries:
        with path.open("rb") as stream:
            if stream.read(4) != ELF_MAGIC:
                continue
        try:
            code = read_elf(path, arcname).gpu_code
        except ElfError:
            continue
        if code is not None:
            found.append((arcname, code))
    return found


def record_bytes_of(binaries: Sequence[tuple[str, Path]]) -> bytes:
    """The record of these binaries (read once every one of them is written)."""
    return record_bytes(binaries_code(binaries))


def read_gpu_record(text: str | bytes) -> GpuCode | None:
    """The wheel's device code from a record found in a wheel or an index page (hostile):
    None unless it is well formed."""
    try:
        document = parse_json(text)
    except (json.JSONDecodeError, UnicodeDecodeError, NestingError):
        return None
    return gpu_code_from(document)


def gpu_code_from(document: object) -> GpuCode | None:
    """``{"cubins": [...], "ptx": [...]}`` (and perhaps ``"code_objects": [...]``) as a
    GpuCode, or None if it is anything else."""
    if not isinstance(document, dict):
        return None
    lists = []
    for key, kind in _NAME_KINDS.items():
        names = document.get(key, [] if key == "code_objects" else None)
        if not isinstance(names, list) or len(names) > _MAX_NAMES or not all(
                isinstance(n, str) and _is_name(n, kind) for n in names):
            return None
        lists.append(sort_target_ids(names) if kind == "gfx" else sort_code_names(names))
    return GpuCode(*lists)


def _is_name(name: str, kind: str) -> bool:
    if kind == "gfx":
        return parse_amd_target(name) is not None
    code = parse_code_name(name)
    return code is not None and code.kind == kind


def wheel_gpu_code(wheel: Path) -> GpuCode | None:
    """The record of a wheel file (a folder of wheels has no index to say it): None
    when it has none or is not a readable wheel (installing it then says so)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist()
                     if n.count("/") == 1 and n.endswith(f".dist-info/{GPU_RECORD}")]
            if len(names) != 1 or archive.getinfo(names[0]).file_size > MAX_RECORD:
                return None
            return read_gpu_record(archive.read(names[0]))
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, NotImplementedError, RuntimeError):
        return None
