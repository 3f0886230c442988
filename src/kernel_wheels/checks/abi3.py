"""Python's limited API: an abi3 wheel's binaries may use only stable-ABI symbols of
the Python version in its tag (``cp39-abi3`` -> 3.9).

The same rules as PyPI's ``abi3audit``, on the symbols the ELF reader (``kernel_wheels.elf``)
already read (both symbol tables, as abi3audit does), with the stable-ABI database it uses
(``abi3info``): a limited-API symbol newer than the tag's Python is a violation, and so is
any other non-local ``Py*``/``_Py*`` symbol except the ``PyInit_*`` entry points. Local
symbols are inlined limited-API code and are fine. NEEDED (libpython, libtorch_python) is
checked in ``linkage.py``.

The database is read from ``data/stable_abi.json``, abi3info's database as a table
(tests/test_stable_abi_table.py compares them): importing abi3info's 970 models costs
about a fifth of checking a small wheel (issue #42). A symbol the table does not know is
asked of abi3info itself, so a newer abi3info still has the last word.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from .. import data
from ..reading import read_json
from ..wheel.variant_label import split_variant_label
from .report import Finding, Status

if TYPE_CHECKING:  # types only
    from ..elf.reader import ElfInfo


Version = tuple[int, int]


def python_tag_version(tag: str) -> Version:
    """``cp39`` -> (3, 9), as abi3info's ``PyVersion.parse_python_tag`` reads a tag (only
    CPython tags with a minor version; anything else is a ValueError)."""
    if not tag.startswith("cp"):
        raise ValueError("expected CPython tag")
    body = tag[2:]
    if "_" in body:
        raise ValueError("unexpected _ in Python tag; not implemented")
    return int(body[0]), int(body[1:])


@cache
def _table() -> dict[str, Version]:
    added: dict[str, list[str]] = data.load("stable_abi")["added"]
    return {name: (int(major), int(minor)) for version, names in added.items()
            for major, minor in [version.split(".")] for name in names}


@cache
def abi3info_added(name: str) -> Version | None:
    """The version abi3info's own database gives ``name`` (None: not in the stable ABI)."""
    from abi3info import DATAS, FUNCTIONS
    from abi3info.models import Symbol

    known = FUNCTIONS.get(Symbol(name)) or DATAS.get(Symbol(name))
    return None if known is None else (known.added.major, known.added.minor)


def added_in(name: str) -> Version | None:
    """The Python version whose limited API added the symbol ``name``; None: not in it."""
    return _table().get(name) or abi3info_added(name)


def _dotted(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def check_abi3(infos: list[ElfInfo], python_tag: str) -> list[Finding]:
    baseline = python_tag_version(python_tag)
    findings = []
    for info in infos:
        computed = baseline
        violations: set[str] = set()
        newer: set[str] = set()
        for symbol in info.python_symbols:
            if symbol.local or symbol.name.startswith("PyInit_"):  # entry points: no abi3info lookup
                continue
            added = added_in(symbol.name)
            if added is not None:
                computed = max(computed, added)
                if added > baseline:
                    newer.add(f"{symbol.name} ({_dotted(added)})")
            else:
                violations.add(symbol.name)
        for name in sorted(violations):
            findings.append(Finding("abi3", Status.FAIL, f"{info.arcname} uses {name}, which is "
                                                         "not in the stable ABI"))
        if newer:
            listed = ", ".join(sorted(newer)[:5]) + (" ..." if len(newer) > 5 else "")
            findings.append(Finding(
                "abi3", Status.FAIL,
                f"{info.arcname} needs the Python {_dotted(computed)} limited API but the wheel is "
                f"tagged for {_dotted(baseline)}: {listed}"))
        if not violations and not newer:
            findings.append(Finding("abi3", Status.PASS, f"{info.arcname}: limited API "
                                                         f"{_dotted(computed)} <= {_dotted(baseline)}"))
    return findings


def check_abi3_with_abi3audit(wheel: Path) -> list[Finding]:
    """abi3audit itself, for the Mach-O binaries of macOS wheels (its own Mach-O reader;
    a subprocess, since it has no public Python API)."""
    with tempfile.TemporaryDirectory(prefix="kernel-wheels-abi3-") as scratch:
        report = Path(scratch) / "report.json"
        plain_name, label = split_variant_label(wheel.name)
        if label is not None:
            # abi3audit knows no variant labels (PEP 825 draft): it reads the same bytes
            # under the file name without one.
            (Path(scratch) / plain_name).symlink_to(wheel.resolve())
            wheel = Path(scratch) / plain_name
        # Its cache and state go to a scratch folder: checks must not write elsewhere.
        env = {**os.environ, "XDG_CACHE_HOME": scratch, "XDG_STATE_HOME": scratch}
        proc = subprocess.run(
            [sys.executable, "-m", "abi3audit", "-R", "-o", str(report), "-S", str(wheel)],
            capture_output=True, text=True, env=env)
        try:
            result = read_json(report, "abi3audit's report", ValueError)
        except (OSError, ValueError):
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:]) or "no output"
            return [Finding("abi3", Status.FAIL, f"abi3audit could not run: {tail}")]
    findings = []
    for spec in result.get("specs", {}).values():
        wheel_report = spec.get("wheel") or []
        for so in wheel_report:
            name = so.get("name", "?")
            audit = so.get("result") or {}
            baseline = audit.get("baseline")
            computed = audit.get("computed")
            for violation in audit.get("non_abi3_symbols", []):
                findings.append(Finding("abi3", Status.FAIL,
                                        f"{name} uses {violation}, which is not in the stable ABI"))
            if audit.get("is_abi3_baseline_compatible") is False:
                findings.append(Finding(
                    "abi3", Status.FAIL,
                    f"{name} needs the Python {computed} limited API but the wheel is tagged "
                    f"for {baseline}"))
            if not any(f.message.startswith(name) for f in findings):
                findings.append(Finding("abi3", Status.PASS,
                                        f"{name}: limited API {computed or 'baseline'} "
                                        f"<= {baseline}"))
    if proc.returncode != 0 and not any(f.status is Status.FAIL for f in findings):
        findings.append(Finding("abi3", Status.FAIL,
                                f"abi3audit failed: {(proc.stderr or proc.stdout).strip()[:300]}"))
    return findings
