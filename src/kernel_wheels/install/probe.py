"""What a Python environment says about itself and its torch, asked inside it: the one
probe of torch (version, CUDA / ROCm / XPU, C++ ABI, MPS, the GPU).

``install`` runs this file's source in the target interpreter (``python -c SOURCE
QUESTION...``, :func:`kernel_wheels.install.environment.read_environment`), which need
not have kernel-wheels: so it imports the standard library only, and torch and
packaging where a question needs them. The ``torch_backend`` variant provider asks it
in the running Python (:func:`answer`). Each caller asks only what it needs, and one
call answers every question it is given, in one JSON object of facts:

- ``python``: the interpreter, its version and implementation, OS, CPU, free threading;
- ``torch``: the versions of the torch and apache-tvm-ffi distributions and, when torch
  is installed, torch imported: its own version, C++ ABI, CUDA / ROCm / XPU versions
  and MPS (a torch that fails to import is ``torch_error``, one line);
- ``gpu`` (with ``torch``): the compute capability (CUDA) or target ID (ROCm's
  ``gcnArchName``) and name of torch's current device, which costs a GPU initialisation;
- ``tags``: the wheel tags the interpreter accepts, best first (packaging's ``sys_tags``:
  the interpreter's own packaging, else pip's vendored copy, else the folder that
  ``KERNEL_WHEELS_PROBE_PATH`` names).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import platform
import sys
import sysconfig
import warnings
from collections.abc import Collection
from typing import Any

QUESTIONS = ("python", "torch", "gpu", "tags")


def answer(questions: Collection[str]) -> dict[str, Any]:
    """The facts that answer ``questions`` (of :data:`QUESTIONS`), in this process."""
    facts: dict[str, Any] = {}
    if "python" in questions:
        facts.update(_python())
    if "torch" in questions:
        facts.update(_torch(gpu="gpu" in questions))
    if "tags" in questions:
        facts["tags"] = [str(tag) for tag in _packaging_tags().sys_tags()]
    return facts


def _python() -> dict[str, Any]:
    return {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "implementation": sys.implementation.name,
        "system": platform.system().lower(),
        "machine": platform.machine(),
        "mac_version": platform.mac_ver()[0] or None,
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    }


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch(gpu: bool) -> dict[str, Any]:
    facts: dict[str, Any] = {"torch_version": _dist_version("torch"),
                             "tvm_ffi_version": _dist_version("apache-tvm-ffi"), "torch_error": None}
    if not facts["torch_version"]:
        return facts  # not installed: torch is not imported (seconds saved)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import torch

            facts["torch_runtime_version"] = torch.__version__
            facts["cxx11_abi"] = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
            facts["cuda"] = torch.version.cuda
            facts["hip"] = torch.version.hip
            facts["xpu"] = getattr(torch.version, "xpu", None)
            mps = getattr(torch.backends, "mps", None)
            facts["mps"] = bool(mps is not None and mps.is_available())
            if gpu:
                facts.update(_gpu(torch))
        except Exception as exc:  # a torch that cannot be imported is a fact, said in one line
            facts["torch_error"] = (type(exc).__name__ + ": " + str(exc)).splitlines()[0][:300]
    return facts


def _gpu(torch: Any) -> dict[str, Any]:
    """The GPU a CUDA or ROCm build must run on (install/gpu.py): torch's current device,
    by its compute capability (CUDA) or its target ID (ROCm's ``gcnArchName``)."""
    try:
        if torch.version.cuda and torch.cuda.is_available():
            return {"gpu_capability": list(torch.cuda.get_device_capability()),
                    "gpu_name": str(torch.cuda.get_device_name())[:100]}
        if torch.version.hip and torch.cuda.is_available():
            properties = torch.cuda.get_device_properties(torch.cuda.current_device())
            return {"gpu_arch_name": str(properties.gcnArchName)[:100],
                    "gpu_name": str(torch.cuda.get_device_name())[:100]}
    except Exception:  # no driver, no device: no GPU to judge by, which is not an error
        pass
    return {}


def _packaging_tags() -> Any:
    for name in ("packaging.tags", "pip._vendor.packaging.tags"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    extra = os.environ.get("KERNEL_WHEELS_PROBE_PATH")
    if extra:
        sys.path.append(extra)
    return importlib.import_module("packaging.tags")


if __name__ == "__main__":
    # Run as ``python -c SOURCE QUESTION...``: the answer is the last line, after anything
    # torch printed (without a newline of its own, perhaps) on importing.
    sys.stdout.write("\n" + json.dumps(answer(sys.argv[1:])) + "\n")
