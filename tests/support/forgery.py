"""A forger who knows the wheel format: members of a real wheel replaced or added, and the
SBOM's file list and RECORD written again to agree with every byte, so that only the
rules that re-derive what kernel-wheels wrote (the closed contract) can tell."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

SBOM_SUFFIX = ".dist-info/sboms/kernel-wheels.cdx.json"


def _record_row(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    return [name, f"sha256={digest}", str(len(data))]


def forge(wheel: Path, target: Path, replaced: dict[str, bytes] | None = None,
          added: dict[str, bytes] | None = None, renamed: tuple[str, str] | None = None) -> Path:
    """``wheel`` with members replaced and added (by their new names), members whose name
    starts with ``renamed[0]`` moved to start with ``renamed[1]`` (a dist-info folder);
    its SBOM lists the files as they now are and RECORD hashes every byte."""
    replaced, added = replaced or {}, added or {}
    old, new = renamed or ("", "")
    with zipfile.ZipFile(wheel) as source:
        names = [new + n[len(old):] if old and n.startswith(old) else n for n in source.namelist()]
        contents = {name: source.read(original) for name, original in zip(names, source.namelist(), strict=True)}
    record = next(n for n in names if n.endswith(".dist-info/RECORD"))
    sbom = next(n for n in names if n.endswith(SBOM_SUFFIX))
    contents.update(replaced)
    for name, data in added.items():
        contents[name] = data
        names.insert(names.index(record), name)
    document = json.loads(contents[sbom])
    kernel = next(c for c in document["components"] if c.get("bom-ref") == "kernel")
    kernel["components"] = [
        {"type": "file", "bom-ref": f"file:{name}", "name": name,
         "hashes": [{"alg": "SHA-256", "content": hashlib.sha256(contents[name]).hexdigest()}],
         "properties": [{"name": "kernel-wheels:size", "value": str(len(contents[name]))}]}
        for name in names if name not in (record, sbom)]
    contents[sbom] = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    rows = [_record_row(name, contents[name]) for name in names if name != record]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([*rows, [record, "", ""]])
    contents[record] = buffer.getvalue().encode()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for name in names:
            out.writestr(name, contents[name])
    return target
