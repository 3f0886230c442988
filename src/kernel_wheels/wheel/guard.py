"""The import guard: a binary wheel installed next to a torch it was not built for
fails ``import <module>`` with an ImportError that names the wheel's build, the running
torch and the command that gets the right wheel, instead of an undefined-symbol or
missing-library error from deep inside the dynamic loader.

Mechanism: the guard is a module of its own, ``<module>/_kernel_wheels_guard.py``, which
the package's loader (:mod:`.loader`) imports before the kernel's own ``__init__.py``
runs. No file of the kernel is changed: they stay what their metadata.json digests.

The rules are the Hub loader's (``kernels``): the same torch major.minor (a stable-ABI
build: that torch or newer), the same C++ ABI, CUDA of the same major and not newer
than torch's, the same ROCm/XPU version; a CPU build loads with any torch. Noarch
builds get no guard. ``KERNEL_WHEELS_SKIP_GUARD=1`` skips the check.
"""

from __future__ import annotations

from typing import Any

from ..kernel.variants import Variant
from .members import Member
from .plan import WheelPlan

GUARD_MODULE = "_kernel_wheels_guard"
_GUARDED_BACKENDS = ("cuda", "rocm", "xpu", "cpu")

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


def guard_member(variant: Variant, module: str, plan: WheelPlan) -> Member | None:
    """``<module>/_kernel_wheels_guard.py`` for a build that needs a guard (a binary torch
    build for CUDA, ROCm, XPU or the CPU); None for the others."""
    if not needs_guard(variant):
        return None
    return Member(f"{module}/{GUARD_MODULE}.py",
                  content=_TEMPLATE.format(build=_build(variant, plan)).encode())


def needs_guard(variant: Variant) -> bool:
    return not variant.noarch and variant.framework in ("torch", "torch-stable-abi") \
        and variant.backend in _GUARDED_BACKENDS
