"""Checks kernel-builder runs on a kernel's sources before building, done the same way:
the package layout, and torch ops registered from Python in the build's own namespace.

A kernel's ops live in a namespace unique to each build (``_relu_cuda_1a2b3c4``), so
that two versions of a kernel load side by side. An op registered from Python under a
fixed name (``@torch.library.custom_op("myns::op")``) breaks that; such decorators must
take ``add_op_namespace_prefix("op")`` from the generated ``_ops`` module.
"""

from __future__ import annotations

import ast
from pathlib import Path

from ..errors import BuildError
from ..reading import read_text
from .config import BuildConfig
from .tree import package_files

#: torch.library decorators whose first argument names an op
TORCH_LIBRARY_DECORATORS = frozenset({"custom_op", "triton_op", "register_kernel", "register_fake",
                                      "register_vmap", "register_torch_dispatch"})
_KINDS = {ast.FunctionDef: "function", ast.AsyncFunctionDef: "async function", ast.ClassDef: "class"}


def _called_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):
            return node.func.id
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
    return None


def unprefixed_registrations(path: Path, relpath: str) -> list[str]:
    """``file:line kind name`` for each top-level definition decorated with a
    torch.library registration whose op name does not come from
    ``add_op_namespace_prefix``."""
    try:
        tree = ast.parse(read_text(path, relpath, BuildError), filename=relpath)
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise BuildError(f"{relpath} is not valid Python: {exc}") from None
    found = []
    for node in tree.body:
        kind = _KINDS.get(type(node))
        if kind is None:
            continue
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        for decorator in node.decorator_list:
            if (_called_name(decorator) in TORCH_LIBRARY_DECORATORS
                    and isinstance(decorator, ast.Call) and decorator.args
                    and _called_name(decorator.args[0]) != "add_op_namespace_prefix"):
                found.append(f"{relpath}:{node.lineno} {kind} {node.name}")
    return found


def check_sources(config: BuildConfig) -> None:
    package = config.package_dir
    where = package.relative_to(config.root).as_posix()
    if not (package / "__init__.py").is_file():
        raise BuildError(f"{where}/__init__.py is missing: the kernel's Python package must "
                         f"live in {where}/")
    if (package / config.module_name).exists():
        # kernel-builder's layout check still refuses it: loaders (and to-wheel) read
        # build/<variant>/<module>/ as the old layout's package folder.
        raise BuildError(f"{where}/{config.module_name} must not exist: loaders take "
                         "build/<variant>/<module>/ for the old layout's package folder")
    violations: list[str] = []
    # every file of the package, walked once here: a link out of the tree stops the build
    # before anything is hashed, compiled or copied
    for path, relpath in package_files(config.root, package):
        if path.suffix == ".py":
            violations += unprefixed_registrations(path, f"{where}/{relpath}")
    if violations:
        raise BuildError(f"torch ops registered outside the kernel's namespace (use "
                         f"add_op_namespace_prefix from ._ops): {'; '.join(violations)}")
