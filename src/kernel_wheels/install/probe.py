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
  ``KERNEL_WHEELS_PROBE_PATH`` names);
- ``installed`` (for ``install``): the site folders, every distribution with the
  top-level names its RECORD lists (``owners``: what a kernel must not write into), and
  torch's dist-info folder.

``install`` asks everything in one run (issue #42: one probe, not five). Run as a script
with ``--early``, it first prints one line of what costs nothing (torch's version from
its metadata, whether pip is there), so that ``install`` can refuse early; it then
answers what needs no torch while ``install`` reads the index, and asks torch only once
``install`` writes ``go`` on its stdin (nothing imports torch for an index that fails).

``KERNEL_WHEELS_PROBE_CACHE`` names a folder of torch's build facts by torch's RECORD
(see :func:`_cache_file`): a torch whose RECORD is the same file for file, hash for hash,
is the same build, so its version, C++ ABI and CUDA / ROCm / XPU versions are the same,
and it need not be imported again to say them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import sysconfig
import warnings
from collections.abc import Collection
from typing import Any

QUESTIONS = ("python", "torch", "gpu", "tags")
#: The build facts a torch's RECORD decides (not the GPU, not MPS: the machine's).
BUILD_FACTS = ("torch_runtime_version", "cxx11_abi", "cuda", "hip", "xpu", "torch_imports")


def answer(questions: Collection[str]) -> dict[str, Any]:
    """The facts that answer ``questions`` (of :data:`QUESTIONS`), in this process."""
    facts: dict[str, Any] = {}
    if "python" in questions:
        facts.update(_python())
    if "torch" in questions:
        facts.update(_torch(gpu="gpu" in questions))
    if "tags" in questions:
        facts["tags"] = [str(tag) for tag in _packaging_tags().sys_tags()]
    if "installed" in questions:
        facts.update(_installed())
    return facts


def early() -> dict[str, Any]:
    """What costs nothing: torch's version (from its metadata) and whether pip is there."""
    return {"python": sys.executable, "torch": _dist_version("torch"),
            "pip": importlib.util.find_spec("pip") is not None}


def _installed() -> dict[str, Any]:
    """The site folders, each distribution's top-level names, torch's dist-info."""
    owners = []
    torch_info = None
    for dist in importlib.metadata.distributions():
        try:
            files = dist.files or []
            name = dist.metadata["Name"] or ""
        except Exception:
            continue
        try:  # a kernel wheel's dist-info holds its provenance record
            kernel = dist.read_text("kernel_wheels.json") is not None
        except Exception:
            kernel = False
        owners.append([str(name), str(dist.version),
                       sorted({f.parts[0] for f in files if f.parts and f.parts[0] != ".."}), kernel])
        path = getattr(dist, "_path", None)
        if torch_info is None and name.lower() == "torch" and path is not None:
            torch_info = str(path)
    paths = sysconfig.get_paths()
    return {"site": sorted({paths["purelib"], paths["platlib"]}), "owners": owners,
            "torch_dist_info": torch_info, "stdlib": sorted(sys.stdlib_module_names)}


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


def _cache_file() -> Any:
    """Where this torch's build facts are kept (None: no cache asked for, or no RECORD).
    The key: torch's RECORD (every file's path, size and sha256) and the interpreter's
    version; whatever torch reports about its build is decided by those files."""
    folder = os.environ.get("KERNEL_WHEELS_PROBE_CACHE")
    if not folder:
        return None
    import hashlib

    try:
        record = importlib.metadata.distribution("torch").read_text("RECORD")
    except Exception:
        return None
    if not record:
        return None
    # RECORD's hashes say what was installed, not what is there now: the files torch's
    # facts come from (its version and its package's start) are keyed by their state too.
    package = importlib.util.find_spec("torch")
    torch_folder = os.path.dirname(package.origin) if package and package.origin else ""
    states = []
    for name in ("__init__.py", "version.py"):
        try:
            found = os.stat(os.path.join(torch_folder, name))
            states.append(f"{name} {found.st_size} {found.st_mtime_ns}")
        except OSError:
            return None
    key = hashlib.sha256(f"{sys.implementation.name} {sys.version}\n{states}\n{record}".encode(
        "utf-8", "surrogateescape")).hexdigest()
    return os.path.join(folder, f"torch-{key}.json")


def _torch(gpu: bool) -> dict[str, Any]:
    facts: dict[str, Any] = {"torch_version": _dist_version("torch"),
                             "tvm_ffi_version": _dist_version("apache-tvm-ffi"), "torch_error": None}
    if not facts["torch_version"]:
        return facts  # not installed: torch is not imported (seconds saved)
    cache = _cache_file()
    cached = None
    if cache is not None:
        try:
            with open(cache, encoding="utf-8") as stream:
                cached = json.load(stream)
        except (OSError, ValueError):
            cached = None
    # A cached build's facts stand for an import, unless the GPU is asked of a GPU build
    # (the device is the machine's, not the build's) or MPS could be there (macOS).
    if isinstance(cached, dict) and set(cached) == set(BUILD_FACTS) and platform.system() != "Darwin" \
            and not (gpu and (cached["cuda"] or cached["hip"])):
        facts.update(cached, mps=False)
        return facts
    asked = _AskedNames()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sys.meta_path.insert(0, asked)
            try:
                import torch
            finally:
                sys.meta_path.remove(asked)
            facts["torch_imports"] = sorted(asked.names - {"torch"})
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
    if cache is not None and facts["torch_error"] is None:
        _remember(cache, {name: facts[name] for name in BUILD_FACTS})
    return facts


class _AskedNames:
    """Hears every top-level name an import looks for and is not imported yet: what
    ``import torch`` asks for (numpy, triton, ... when present) is a name no kernel may
    take, or that import would load the kernel instead (install/gate.py)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if "." not in fullname:
            self.names.add(fullname)
        return None


def _remember(path: str, build: dict[str, Any]) -> None:
    """Keep a torch's build facts (a rename: a reader sees the whole file or none)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temp = f"{path}.{os.getpid()}"
        with open(temp, "w", encoding="utf-8") as stream:
            json.dump(build, stream)
        os.replace(temp, path)
    except OSError:
        pass  # a cache that cannot be written costs the next run an import of torch


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
    # Run as ``python -c SOURCE [--early] QUESTION...``: the answer is the last line, after
    # anything torch printed (without a newline of its own, perhaps) on importing; with
    # --early, the early facts come first, on a line of their own, before torch is imported.
    asked = sys.argv[1:]
    if asked[:1] == ["--early"]:
        # Then what needs no torch, while install reads the index; torch only once
        # install says "go" on stdin (the index answered: torch's import is worth it).
        asked = asked[1:]
        sys.stdout.write(json.dumps(early()) + "\n")
        sys.stdout.flush()
        facts = answer([q for q in asked if q not in ("torch", "gpu")])
        if sys.stdin.readline().strip() != "go":
            raise SystemExit(0)
        facts.update(answer([q for q in asked if q in ("torch", "gpu")]))
    else:
        facts = answer(asked)
    sys.stdout.write("\n" + json.dumps(facts) + "\n")
