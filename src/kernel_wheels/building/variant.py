"""Writing one variant folder, ``OUT/build/<variant>/``, as kernel-builder lays it out.

Arch variants (compiled): the package's ``*.py`` files and its ``pyext`` data files,
``_ops.py`` naming the build's ops namespace, the extension, and ``metadata.json``.
Noarch variants (``torch-<backend>``): every file of the package and an ``_ops.py``
that picks the ops namespace of the backend torch runs on. Both get ``metadata.json``
with the digests of every file. The layout is flat, as kernel-builder writes it since
it stopped generating the compatibility sub-package (``build/<variant>/<module>/``,
huggingface/kernels#736): that sub-package shadowed a module of the kernel's own name
(``einops/einops.py``), which then imported itself. The folder is assembled beside its
final place and renamed in: a failed or interrupted build never leaves half a variant.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from ..errors import BuildError
from ..kernel.digest import digest_folder
from .config import BuildConfig
from .tree import package_files


def ops_py(ext_name: str) -> str:
    return (
        "import torch\n\n"
        f"from . import {ext_name}\n\n"
        f"ops = torch.ops.{ext_name}\n\n\n"
        "def add_op_namespace_prefix(op_name: str) -> str:\n"
        '    """Prefix an op name with this build\'s unique ops namespace."""\n'
        f'    return f"{ext_name}::{{op_name}}"\n'
    )


def tvm_ffi_ops_py(ext_name: str) -> str:
    """kernel-builder's tvm-ffi ``_ops.py`` (templates/tvm_ffi/_ops.py.in): the library
    loaded with ``tvm_ffi.load_module``, and the JAX and torch name prefixes."""
    return f'''from importlib.util import find_spec
from pathlib import Path
import platform

import tvm_ffi

_SELF_PATH = Path(__file__).parent

has_jax = find_spec("jax") and find_spec("jax_tvm_ffi")

has_torch = find_spec("torch")

if platform.system() == "Darwin":
    ops = tvm_ffi.load_module(_SELF_PATH / "{ext_name}.dylib")
elif platform.system() == "Windows":
    ops = tvm_ffi.load_module(_SELF_PATH / "{ext_name}.dll")
else:
    ops = tvm_ffi.load_module(_SELF_PATH / "{ext_name}.so")


def jax_add_ffi_target_name_prefix(name: str):
    """
    Prefix JAX FFI target name by namespace.
    """
    return f"{ext_name}.{{name}}"

def torch_add_op_namespace_prefix(op_name: str):
    """
    Prefix Torch op by namespace.
    """
    return f"{ext_name}::{{op_name}}"

def jax_register_ffi_target(name: str, *args, **kwargs):
    if has_jax:
        from jax_tvm_ffi import register_ffi_target

        return register_ffi_target(f"{ext_name}.{{name}}", *args, **kwargs)

def jax_ffi_call(name: str, *args, **kwargs):
    if has_jax:
        from jax.ffi import ffi_call

        return ffi_call(f"{ext_name}.{{name}}", *args, **kwargs)

    raise RuntimeError("jax is not available, cannot call jax_ffi_call")
'''


def noarch_ops_py(module: str, build_id: str) -> str:
    """The ops namespace of a noarch build depends on the backend torch runs on
    (``_<module>_<backend>_<id>``), detected in the same order as kernel-builder's."""
    return f'''import torch


def get_backend() -> str:
    """The backend of the running torch."""
    if hasattr(torch.backends, "tpu"):
        return "tpu"
    if hasattr(torch, "neuron"):
        return "neuron"
    if torch.version.cuda is not None:
        return "cuda"
    if torch.version.hip is not None:
        return "rocm"
    if torch.backends.mps.is_available():
        return "metal"
    if getattr(torch.version, "xpu", None) is not None:
        return "xpu"
    return "cpu"


_OPS_NAME = f"_{module}_{{get_backend()}}_{build_id}"

ops = getattr(torch.ops, _OPS_NAME)


def add_op_namespace_prefix(op_name: str) -> str:
    """Prefix an op name with this build's unique ops namespace."""
    return f"{{_OPS_NAME}}::{{op_name}}"
'''


def metadata(config: BuildConfig, backend: str, ext_name: str,
             archs: list[str] | None) -> dict[str, object]:
    """``metadata.json`` without its digest, keys in kernel-builder's order."""
    meta: dict[str, object] = {"name": config.name, "id": ext_name, "version": config.version,
                               "license": config.license}
    if config.upstream:
        meta["upstream"] = config.upstream
    if config.source:
        meta["source"] = config.source
    if config.hub_repo_id:
        # The Hub repository the kernel is published as: to-wheel carries it into the
        # wheel, and local-kernels maps it for get_kernel (kernels ignores the key).
        meta["repo-id"] = config.hub_repo_id
    meta["python-depends"] = list(config.all_python_depends(backend))
    meta["kernel-depends"] = [d.as_json() for d in config.all_kernel_depends(backend)]
    backend_info: dict[str, object] = {"type": backend}
    if archs:
        # kernel-builder's add_build_metadata.py: sorted(set(...)) of the strings
        backend_info["archs"] = sorted(set(archs))
    meta["backend"] = backend_info
    return meta


def _copy_package(config: BuildConfig, staging: Path, everything: bool) -> None:
    package = config.package_dir
    if not (package / "__init__.py").is_file():
        raise BuildError(f"{package}/__init__.py is missing: the kernel has no Python package")
    suffixes = {".py", *(f".{e}" for e in config.framework.data_extensions())}
    # links that lead out of the tree are refused here too (tree.package_files), so
    # nothing of the build machine is copied in
    for path, relpath in package_files(config.root, package):
        if path.suffix == ".pyc":
            continue
        if not everything and path.suffix not in suffixes:
            continue
        target = staging / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def write_variant(config: BuildConfig, variant_dir: Path, backend: str, ext_name: str,
                  extension: Path | None, archs: list[str] | None, build_id: str) -> None:
    """Write one variant folder (flat layout) atomically: build beside, then rename."""
    variant_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{variant_dir.name}.", dir=variant_dir.parent))
    try:
        _copy_package(config, staging, everything=extension is None)
        if extension is not None:
            tvm_ffi = config.framework.kind == "tvm-ffi"
            (staging / "_ops.py").write_text(tvm_ffi_ops_py(ext_name) if tvm_ffi else ops_py(ext_name))
            shutil.copyfile(extension, staging / extension.name)
        else:
            (staging / "_ops.py").write_text(noarch_ops_py(config.module_name, build_id))
        meta = metadata(config, backend, ext_name, archs)
        meta["digest"] = {"algorithm": "sha256", "files": digest_folder(staging)}
        (staging / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
        for path in staging.rglob("*"):
            path.chmod(0o755 if path.is_dir() or path.suffix == ".so" else 0o644)
        staging.chmod(0o755)
        if variant_dir.exists():
            shutil.rmtree(variant_dir)
        staging.rename(variant_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
