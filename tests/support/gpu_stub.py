"""A stand-in for a CUDA build made from a real host binary: a copy of it with a
``.nv_fatbin`` section whose fat binary lists cubins and PTX for the given
architectures (entries without payload, as ``kernel-wheels check`` reads only their
headers). For fixtures that fake CUDA variants with the sample's CPU extension: since
issue #32, ``check`` fails a CUDA build whose binaries hold no device code."""

from __future__ import annotations

import struct
import subprocess
import tempfile
from pathlib import Path

_KIND = {"sm": 2, "compute": 1}


def fatbin(names: tuple[str, ...]) -> bytes:
    """A fat binary container with one empty entry per ``sm_80`` / ``compute_90`` name."""
    body = b""
    for name in names:
        prefix, number = name.split("_")
        kind = _KIND[prefix]
        body += struct.pack("<HHIQIIIIIIQQQ", kind, 0x101, 64, 0, 0, 0, 0x10008 if kind == 2 else 0x90000,
                            int(number), 0, 0, 0x11, 0, 0)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def with_device_code(binary: Path, target: Path,
                     names: tuple[str, ...] = ("sm_80", "sm_90", "compute_90")) -> Path:
    """``binary`` copied to ``target`` with a fat binary for ``names`` (default: what the
    fixtures' metadata.json claims, 8.0 and 9.0+PTX)."""
    with tempfile.TemporaryDirectory() as scratch:
        blob = Path(scratch) / "fatbin"
        blob.write_bytes(fatbin(names))
        subprocess.run(["objcopy", "--add-section", f".nv_fatbin={blob}", "--set-section-flags",
                        ".nv_fatbin=readonly,data", str(binary), str(target)], check=True,
                       capture_output=True)
    return target
