"""A realistic Hub kernel to convert: build variants, a git repository, tag v1.0.0.

Each variant is the flat layout kernel-builder writes today: ``__init__.py``, ``_ops.py``,
``_<module>_<backend>_<id>.abi3.so``, ``metadata.json`` (name, id, version, license,
backend, digest) and the compatibility sub-package ``<module>/__init__.py``.

The extension is a real limited-API (abi3) module compiled here: ``PyInit_<name>``
returning ``PyModule_Create``, NEEDED on libc10/libtorch like a real kernel, no RPATH,
and a large ``.rodata`` blob (``.incbin`` of real torch-library bytes, see
``payload``) standing in for the bulk of a real kernel's device code. A CUDA variant's
extension also carries real device code for every capability its metadata.json claims
(nvcc's fat binary of a small kernel in ``.nv_fatbin``), a ROCm variant's a HIP code
object per claimed target (clang's offload bundle in ``.hip_fatbin``), compiled and
added by the tests' own helpers (``tests/support/gpu_builds.py``, ``gpu_stub.py``). It passes
``kernel-wheels check`` (manylinux_2_28, abi3, PyInit, the GPU code its claims need)
like a real build would.

Everything is cached under ``benchmarks/.work`` and rebuilt only when missing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tests.support.gpu_builds import clang_hip_bundle, nvcc_fatbin
from tests.support.gpu_stub import add_section

from .config import KERNEL_NAME, KERNELS, RELEASE, WORK, torch_lib
from .payload import write_payload

MODULE = KERNEL_NAME.replace("-", "_")
MB = 1_000_000

# Variant names as real releases spell them. Interleaved so that the first few already
# mix torch versions and backends (a 4-variant release is not four CUDA versions of one torch).
TORCH_VERSIONS = ("27", "28", "29", "210", "211", "212", "213", "214")
BACKENDS = ("cu128", "cpu", "cu126", "rocm64", "cu130", "xpu20252", "cu118", "cu129")
# What metadata.json claims; the GPU variants' binaries hold code for exactly these.
_ARCHS = {"cuda": ["7.5", "8.0", "9.0", "10.0", "12.0+PTX"], "rocm": ["gfx90a", "gfx942"],
          "xpu": [], "cpu": []}
_COMMIT_DATE = "1767225600 +0000"  # 2026-01-01: fixed, so the same inputs give the same SHAs


def variant_names(count: int) -> list[str]:
    """``count`` distinct Linux x86-64 variant names (at most 64)."""
    columns = len(TORCH_VERSIONS)
    if count > columns * len(BACKENDS):
        raise ValueError(f"at most {columns * len(BACKENDS)} variants")
    names = []
    for k in range(count):
        row, column = divmod(k, columns)
        backend = BACKENDS[(row + column) % len(BACKENDS)]
        names.append(f"torch{TORCH_VERSIONS[column]}-cxx11-{backend}-x86_64-linux")
    return names


def backend_type(variant: str) -> str:
    backend = variant.split("-")[2]
    for prefix, kind in (("cu", "cuda"), ("rocm", "rocm"), ("xpu", "xpu")):
        if backend.startswith(prefix):
            return kind
    return "cpu"


def extension_name(variant: str) -> str:
    """``_bench_attention_cuda_1a2b3c4``: unique per build, as kernel-builder names it."""
    build_id = hashlib.sha1(variant.encode()).hexdigest()[:7]
    return f"_{MODULE}_{backend_type(variant)}_{build_id}"


# -- the extension module ---------------------------------------------------------------
_EXTENSION_C = """\
#define Py_LIMITED_API 0x03090000
#include <Python.h>

static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{name}", NULL, 0, NULL}};

PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&module); }}
"""

# The device code stand-in. .incbin copies the file's bytes into the object as they are.
_PAYLOAD_S = """\
    .section .rodata.kernel_images,"a"
    .globl {name}_images
    .type {name}_images, @object
    .balign 64
{name}_images:
    .incbin "{blob}"
    .size {name}_images, . - {name}_images
    .section .note.GNU-stack,"",@progbits
"""


def compile_extension(dest: Path, name: str, payload_bytes: int, seed: int) -> None:
    """Compile ``dest`` (``<name>.abi3.so``) with ``payload_bytes`` of real bytes in .rodata."""
    include = sysconfig.get_paths()["include"]
    with tempfile.TemporaryDirectory(prefix="kwbench-ext-", dir=WORK) as scratch:
        folder = Path(scratch)
        (folder / "ext.c").write_text(_EXTENSION_C.format(name=name))
        sources = ["ext.c"]
        if payload_bytes:
            write_payload(folder / "images.bin", payload_bytes, seed)
            (folder / "images.S").write_text(_PAYLOAD_S.format(name=name, blob=folder / "images.bin"))
            sources.append("images.S")
        # -g0 and no RPATH, as kernel-builder builds; NEEDED on torch like a real kernel
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-g0", f"-I{include}", *sources,
                        "-o", str(dest), f"-L{torch_lib()}", "-Wl,--no-as-needed", "-lc10",
                        "-ltorch", "-Wl,--as-needed"],
                       cwd=folder, check=True, capture_output=True)


def add_device_code(extension: Path, kind: str) -> None:
    """The device code a ``kind`` (cuda, rocm) build claims (``_ARCHS``), added to
    ``extension`` in place; compiled once per backend (nvcc, clang) and cached."""
    archs = tuple(_ARCHS[kind])
    code = KERNELS / "device-code" / f"{kind}-{'-'.join(archs)}.bin"
    if not code.exists():
        scratch = code.with_name(code.name + ".partial")
        scratch.parent.mkdir(parents=True, exist_ok=True)
        (nvcc_fatbin if kind == "cuda" else clang_hip_bundle)(scratch, archs)
        scratch.rename(code)
    add_section(extension, extension, ".nv_fatbin" if kind == "cuda" else ".hip_fatbin", code)


# -- a variant folder -------------------------------------------------------------------
def _digest(variant_dir: Path) -> dict[str, str]:
    """metadata.json's digest: base64 sha256 of every file but metadata.json itself."""
    files = {}
    for path in sorted(variant_dir.rglob("*")):
        relpath = path.relative_to(variant_dir).as_posix()
        if path.is_file() and relpath != "metadata.json":
            digest = hashlib.sha256()
            with path.open("rb") as stream:
                while chunk := stream.read(1 << 20):
                    digest.update(chunk)
            files[relpath] = base64.b64encode(digest.digest()).decode("ascii")
    return files


def write_variant(folder: Path, variant: str, payload_bytes: int, seed: int,
                  extra_libraries: Mapping[str, Path] | None = None) -> None:
    """A flat-layout variant folder, as kernel-builder writes it; ``extra_libraries``
    (file name -> source) are copied in next to the extension."""
    name = extension_name(variant)
    folder.mkdir(parents=True)
    compile_extension(folder / f"{name}.abi3.so", name, payload_bytes, seed)
    kind = backend_type(variant)
    if kind in ("cuda", "rocm"):
        add_device_code(folder / f"{name}.abi3.so", kind)
    for file_name, library in (extra_libraries or {}).items():
        shutil.copyfile(library, folder / file_name)
    (folder / "_ops.py").write_text(
        f"import torch\nfrom . import {name}\nops = torch.ops.{name}\n\n\n"
        "def add_op_namespace_prefix(op_name: str) -> str:\n"
        '    """Prefix op by namespace."""\n'
        f'    return f"{name}::{{op_name}}"\n')
    (folder / "__init__.py").write_text(
        "import torch\n\nfrom ._ops import ops\n\n\n"
        "def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:\n"
        "    out = torch.empty_like(q)\n    ops.attention(out, q, k, v)\n    return out\n\n\n"
        '__all__ = ["attention", "ops"]\n')
    compat = folder / MODULE
    compat.mkdir()
    (compat / "__init__.py").write_text(
        "# Compatibility package: the flat build is the package itself.\nfrom .. import *  # noqa\n")
    meta = {"name": KERNEL_NAME, "id": name, "version": 1, "license": "Apache-2.0",
            "python-depends": [], "backend": {"type": kind, "archs": _ARCHS[kind]},
            "digest": {"algorithm": "sha256", "files": _digest(folder)}}
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")


def cached_variant(variant: str, payload_mb: int, seed: int) -> Path:
    """The variant folder under .work/variants/<size>/, built once."""
    folder = KERNELS / "variants" / f"{payload_mb}mb" / variant
    done = folder.with_name(folder.name + ".done")
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        write_variant(folder, variant, payload_mb * MB, seed)
        done.touch()
    return folder


# -- the git repository ----------------------------------------------------------------
def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "kwbench", "GIT_AUTHOR_EMAIL": "kwbench@example.invalid",
           "GIT_COMMITTER_NAME": "kwbench", "GIT_COMMITTER_EMAIL": "kwbench@example.invalid",
           "GIT_AUTHOR_DATE": _COMMIT_DATE, "GIT_COMMITTER_DATE": _COMMIT_DATE}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


CARD = f"""---
license: apache-2.0
tags:
- kernel
---
# {KERNEL_NAME}

A benchmark kernel for kernel-wheels: real extension modules carrying slices of torch's
libraries in place of device code.
"""


def make_repo(repo: Path, variants: dict[str, Path]) -> Path:
    """A git repo with README.md and build/<variant>/, tag v1.0.0; files are hard links to
    the cached variant folders. Returns ``repo``; reuses it when it is already complete."""
    if repo.is_dir():
        try:
            _git(repo, "rev-parse", "--verify", "-q", f"refs/tags/v{RELEASE}")
            return repo
        except subprocess.CalledProcessError:
            pass
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    # Store blobs uncompressed and never repack: these are GBs of incompressible-ish
    # binaries, and olah reads each blob whole on every request.
    for key, value in (("core.compression", "0"), ("core.looseCompression", "0"),
                       ("gc.auto", "0"), ("commit.gpgsign", "false"), ("tag.gpgsign", "false")):
        _git(repo, "config", key, value)
    (repo / "README.md").write_text(CARD)
    for variant, source in variants.items():
        for path in sorted(source.rglob("*")):
            target = repo / "build" / variant / path.relative_to(source)
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, target)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"Release {RELEASE}")
    _git(repo, "tag", "-a", f"v{RELEASE}", "-m", f"v{RELEASE}")
    return repo


def repo_files(repo: Path) -> list[str]:
    """Every file path at tag v1.0.0 (what a full download fetches)."""
    return _git(repo, "ls-tree", "-r", "--name-only", f"v{RELEASE}").splitlines()


def release_commit(repo: Path) -> str:
    return _git(repo, "rev-parse", f"v{RELEASE}^{{commit}}")
