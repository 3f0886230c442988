"""The import guard: a binary wheel installed next to a torch it was not built for
fails ``import <module>`` with an ImportError that names the wheel's build, the running
torch and the command that gets the right wheel, instead of an undefined-symbol or
missing-library error from deep inside the dynamic loader.

Mechanism (the smallest change that runs before the kernel's binary loads): one module
is added, ``<module>/_kernel_wheels_guard.py``, and one line importing it is inserted
into ``<module>/__init__.py`` after its docstring and ``__future__`` imports. Every other
file stays byte-identical. The provenance record lists both changes, with the inserted
line and where it went, so ``check`` can still verify ``__init__.py`` against the
kernel's own metadata.json digest.

The rules are the Hub loader's (``kernels``): the same torch major.minor (a stable-ABI
build: that torch or newer), the same C++ ABI, CUDA of the same major and not newer
than torch's, the same ROCm/XPU version; a CPU build loads with any torch. Noarch
builds get no guard. ``KERNEL_WHEELS_SKIP_GUARD=1`` skips the check.
"""

from __future__ import annotations

import ast
import base64
import hashlib
from typing import Any

from ..errors import VariantError
from ..kernel.variants import Variant
from .plan import WheelPlan
from .writer import Member

GUARD_MODULE = "_kernel_wheels_guard"
GUARD_LINE = (f"from . import {GUARD_MODULE}  # noqa: F401 -- added by kernel-wheels: fails "
              "clearly when this build does not fit the running torch\n")
_GUARDED_BACKENDS = ("cuda", "rocm", "xpu", "cpu")
#: A kernel's __init__.py is kilobytes; one larger than this is not read (or parsed).
MAX_INIT_SIZE = 1 << 20

_TEMPLATE = '''\
"""Added by kernel-wheels to this wheel: a binary build of a torch kernel loads only next
to the torch it was built for, and otherwise fails with an unreadable undefined-symbol or
missing-library error. This check runs first and says what to install instead.
Set KERNEL_WHEELS_SKIP_GUARD=1 to skip it."""

import os
import platform

BUILD = {build!r}


def _running():
    import torch

    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    cuda = getattr(torch.version, "cuda", None)
    hip = getattr(torch.version, "hip", None)
    xpu = getattr(torch.version, "xpu", None)
    linux = platform.system() == "Linux"
    cxx = None
    if linux:
        cxx = "cxx11" if torch._C._GLIBCXX_USE_CXX11_ABI else "cxx98"
    if cuda:
        backend = ("cuda", tuple(int(p) for p in cuda.split(".")[:2]), "CUDA " + cuda)
    elif hip:
        version = tuple(int(p) for p in hip.split("-")[0].split(".")[:2])
        backend = ("rocm", version, "ROCm " + hip)
    elif xpu:
        backend = ("xpu", (int(xpu[0:4]), int(xpu[5:6] or 0)), "XPU " + xpu)
    else:
        backend = ("cpu", None, "CPU only")
    return torch.__version__, (major, minor), cxx, backend


def _target(version, cxx, backend):
    kind, numbers, _ = backend
    tag = {{"cuda": "cu", "rocm": "rocm", "xpu": "xpu"}}.get(kind, kind)
    if numbers:
        tag += "%d%d" % numbers
    return "torch%d%d" % version + ("-" + cxx if cxx else "") + "-" + tag


def _problems(version, cxx, backend):
    problems = []
    built = tuple(BUILD["framework_version"])
    if BUILD["framework"] == "torch-stable-abi":
        if version < built:
            problems.append("it needs torch %d.%d or newer" % built)
    elif version != built:
        problems.append("it needs torch %d.%d" % built)
    if BUILD["cxx_abi"] and cxx and BUILD["cxx_abi"] != cxx:
        problems.append("it was built with the %s C++ ABI, this torch uses %s" % (BUILD["cxx_abi"], cxx))
    kind, numbers, _ = backend
    wanted = BUILD["backend"]
    if wanted == "cpu":
        return problems
    if kind != wanted:
        name = {{"cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU"}}[wanted]
        problems.append("it needs a %s build of torch" % name)
    elif BUILD["backend_version"]:
        built_backend = tuple(BUILD["backend_version"])
        if wanted == "cuda":
            if numbers[0] != built_backend[0] or numbers[1] < built_backend[1]:
                problems.append("it needs CUDA %d.x, at least %d.%d" % (built_backend[0], *built_backend))
        elif numbers != built_backend:
            label = "XPU" if wanted == "xpu" else "ROCm"
            problems.append("it needs %s %d.%d" % (label, *built_backend))
    return problems


def _check():
    if os.environ.get("KERNEL_WHEELS_SKIP_GUARD"):
        return
    torch_version, version, cxx, backend = _running()
    problems = _problems(version, cxx, backend)
    if not problems:
        return
    release = BUILD["release"]
    name = BUILD["distribution"]
    raise ImportError(
        "%s %s is the build %s, which does not fit this Python's torch %s (%s): %s. "
        "Install the build for this torch: kernel-wheels install %s==%s --index-url <your index> "
        "(or: pip install %s==%s --index-url <your index>/%s/simple)"
        % (name, BUILD["version"], BUILD["variant"], torch_version, backend[2],
           "; ".join(problems), name, release, name, release, _target(version, cxx, backend)))


_check()
'''


def _refuse_large(size: int, where: str) -> None:
    if size > MAX_INIT_SIZE:
        raise VariantError(f"{where} is {size / 1e6:.1f} MB, more than a kernel's package needs "
                           f"({MAX_INIT_SIZE >> 20} MB at most); refusing to read it")


def _insertion_line(source: bytes, where: str) -> int | None:
    """The 0-based line after the module docstring and ``__future__`` imports (where
    an import may go), or None when the file does not parse. A file too large or nested
    too deeply for the parser (a hostile source tree's) is one line naming ``where``, not
    a crash."""
    _refuse_large(len(source), where)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        raise VariantError(f"{where} is nested too deeply to be parsed; refusing to read it") \
            from None
    line = 0
    for index, node in enumerate(tree.body):
        value = node.value if isinstance(node, ast.Expr) else None
        is_docstring = index == 0 and isinstance(value, ast.Constant) and isinstance(value.value, str)
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (is_docstring or is_future):
            break
        line = node.end_lineno or line
    return line


def insert_guard_line(source: bytes, where: str = "__init__.py") -> tuple[bytes, int] | None:
    """``__init__.py`` with the guard import inserted, and the 0-based line it went to."""
    at = _insertion_line(source, where)
    if at is None:
        return None
    lines = source.splitlines(keepends=True)
    if at and at <= len(lines) and not lines[at - 1].endswith((b"\n", b"\r")):
        return None  # a docstring or import ending without a newline: leave the file alone
    newline = b"\r\n" if b"\r\n" in source else b"\n"
    line = GUARD_LINE.encode().replace(b"\n", newline)
    return b"".join([*lines[:at], line, *lines[at:]]), at


def remove_guard_line(modified: bytes, record: dict[str, Any]) -> bytes | None:
    """The original ``__init__.py`` from a guarded one and its provenance entry; None
    when the recorded line is not where the record says."""
    lines = modified.splitlines(keepends=True)
    at = record.get("inserted_line")
    text = record.get("text")
    if not isinstance(at, int) or not isinstance(text, str) or not 0 <= at < len(lines):
        return None
    if lines[at].decode("utf-8", "replace").rstrip("\r\n") != text.rstrip("\n"):
        return None
    return b"".join(lines[:at] + lines[at + 1:])


def _build(variant: Variant, plan: WheelPlan) -> dict[str, Any]:
    version = plan.version
    return {
        "distribution": plan.project_name,
        "version": version,
        "release": version.split("+", 1)[0],
        "variant": variant.name,
        "framework": variant.framework,
        "framework_version": list(variant.framework_version or (0, 0)),
        "cxx_abi": variant.cxx_abi if variant.os == "linux" else None,
        "backend": variant.backend,
        "backend_version": [int(p) for p in variant.backend_version.split(".")]
        if variant.backend_version else None,
    }


def guard_members(members: list[Member], variant: Variant, module: str,
                  plan: WheelPlan) -> tuple[list[Member], dict[str, Any] | None]:
    """The members with the guard added, and what was added (for the provenance record);
    the members unchanged and None for builds that need no guard."""
    if variant.noarch or variant.framework not in ("torch", "torch-stable-abi") \
            or variant.backend not in _GUARDED_BACKENDS:
        return members, None
    init_name = f"{module}/__init__.py"
    init = next((m for m in members if m.arcname == init_name), None)
    if init is None:
        return members, None
    where = f"build/{variant.name}: {init_name}"
    _refuse_large(init.size, where)  # before reading it: a sparse 4 GB file stays on disk
    original = init.read_bytes()
    inserted = insert_guard_line(original, where)
    if inserted is None:
        return members, None
    modified, at = inserted
    guard_name = f"{module}/{GUARD_MODULE}.py"
    guarded = [m for m in members if m.arcname != init_name]
    guarded.append(Member(init_name, content=modified))
    guarded.append(Member(guard_name, content=_TEMPLATE.format(build=_build(variant, plan)).encode()))
    added = {
        "import_guard": guard_name,
        "modified": {init_name: {
            "inserted_line": at,
            "text": GUARD_LINE,
            "original_sha256": base64.b64encode(hashlib.sha256(original).digest()).decode(),
        }},
    }
    return guarded, added
