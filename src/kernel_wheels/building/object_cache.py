"""Incremental builds: compiled objects kept by the command that made them and the
contents of every file the compiler read (its ``-MD`` dependency list), like ccache's
direct mode. An unchanged source with unchanged headers and flags is not compiled
again, whatever output folder it is built into; a changed header is noticed.

Entries live in kernel-wheels' cache (``$KERNEL_WHEELS_CACHE/build-objects``), are
written atomically (a killed build leaves no half entry) and are pruned when unused
for 30 days.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from ..cache import cache_dir
from ..reading import read_json

MAX_AGE_SECONDS = 30 * 24 * 3600
#: arguments that change how fast a compiler runs, never what it produces
_SPEED_ONLY = ("--threads=",)
#: The ops namespace changes with every source edit (it is a hash of the sources). It
#: can only change the objects of files whose inputs mention it, so it is left out of
#: the key and checked only for those: editing one file does not recompile the rest.
#: (torch kernels name it TORCH_EXTENSION_NAME, tvm-ffi kernels TVM_FFI_EXTENSION_NAME)
NAME_DEFINES = ("-DTORCH_EXTENSION_NAME=", "-DTVM_FFI_EXTENSION_NAME=")
_NAME_TOKENS = (b"TORCH_EXTENSION_NAME", b"TVM_FFI_EXTENSION_NAME")


def _root() -> Path:
    return cache_dir("build-objects")


def command_key(arguments: tuple[str, ...], source: Path, compiler_id: str) -> str:
    kept = [a for a in arguments if not a.startswith((*_SPEED_ONLY, *NAME_DEFINES))]
    text = json.dumps([compiler_id, str(source), kept])
    return hashlib.sha256(text.encode()).hexdigest()


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of a make-style dependency file (``obj.o: a.cpp b.h \\``)."""
    body = text.replace("\\\n", " ")
    paths: list[str] = []
    for line in body.splitlines():
        if ":" not in line:
            continue
        _, _, prerequisites = line.partition(": ")
        token = ""
        escaped = False
        for char in prerequisites:
            if escaped:
                token += char
                escaped = False
            elif char == "\\":
                escaped = True
            elif char.isspace():
                if token:
                    paths.append(token)
                token = ""
            else:
                token += char
        if token:
            paths.append(token)
    return list(dict.fromkeys(paths))


def _unchanged(inputs: list[dict[str, object]]) -> bool:
    for entry in inputs:
        path = Path(str(entry["path"]))
        try:
            stat = path.stat()
        except OSError:
            return False
        if stat.st_size != entry["size"]:
            return False
        if stat.st_mtime_ns != entry["mtime_ns"] and _file_hash(path) != entry["sha256"]:
            return False
    return True


def extension_name(arguments: tuple[str, ...]) -> str:
    return next((a.partition("=")[2] for a in arguments if a.startswith(NAME_DEFINES)), "")


def lookup(key: str, name: str) -> Path | None:
    """The cached object for this command whose inputs are all unchanged (and, if they
    mention the ops namespace, built for the same one), if any."""
    folder = _root() / key[:2] / key
    if not folder.is_dir():
        return None
    for entry in sorted(folder.iterdir()):
        manifest_path = entry / "inputs.json"
        try:
            manifest = read_json(manifest_path, "a cached object's inputs", ValueError)
        except (OSError, ValueError):
            continue
        if not isinstance(manifest, dict):
            continue
        if manifest.get("name_sensitive") and manifest.get("name") != name:
            continue
        if _unchanged(manifest["inputs"]):
            os.utime(entry)  # keep it from being pruned
            return entry / "object.o"
    return None


def store(key: str, name: str, obj: Path, depfile: Path) -> Path:
    """Keep ``obj`` with the list of its inputs; returns the cached object's path."""
    inputs = []
    name_sensitive = False
    try:
        dependencies = parse_depfile(depfile.read_text())
    except OSError:
        return obj  # no dependency list: never reuse it
    for dependency in dependencies:
        path = Path(dependency)
        if not path.is_absolute():
            return obj  # relative paths depend on the compiler's folder: not reusable
        try:
            stat = path.stat()
            content = path.read_bytes()
        except OSError:
            # gone already, or seen only by the compiler (a compiler in a container or
            # chroot names its own headers): the object cannot be checked later either
            return obj
        name_sensitive = name_sensitive or any(token in content for token in _NAME_TOKENS)
        inputs.append({"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                       "sha256": hashlib.sha256(content).hexdigest()})
    recorded = [name if name_sensitive else "", *(str(i["sha256"]) for i in inputs)]
    digest = hashlib.sha256(json.dumps(recorded).encode()).hexdigest()[:16]
    folder = _root() / key[:2] / key
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / digest
    if final.is_dir():
        return final / "object.o"
    staging = Path(tempfile.mkdtemp(prefix=".new-", dir=folder))
    try:
        shutil.copyfile(obj, staging / "object.o")
        manifest = {"name_sensitive": name_sensitive, "name": name, "inputs": inputs}
        (staging / "inputs.json").write_text(json.dumps(manifest))
        staging.rename(final)
    except OSError:
        if not final.is_dir():
            return obj
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final / "object.o"


def prune(now: float | None = None) -> None:
    """Forget objects unused for :data:`MAX_AGE_SECONDS` (and stale half-written ones)."""
    now = time.time() if now is None else now
    root = _root()
    if not root.is_dir():
        return
    for bucket in root.iterdir():
        for key in bucket.iterdir() if bucket.is_dir() else ():
            for entry in key.iterdir():
                try:
                    if now - entry.stat().st_mtime > MAX_AGE_SECONDS or (
                            entry.name.startswith(".new-") and now - entry.stat().st_mtime > 3600):
                        shutil.rmtree(entry, ignore_errors=True)
                except OSError:
                    continue
