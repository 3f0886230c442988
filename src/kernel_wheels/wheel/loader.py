"""The package a kernel wheel installs: a loader in front of the Hub's variant folder.

A wheel carries the variant folder whole and unchanged at ``<module>/<variant>/`` (the
``kernels`` library verifies a variant against its metadata.json digest, which lists
every file of the folder, so nothing may be added to it or changed in it). What
``import <module>`` runs is ``<module>/__init__.py``, written here: it imports the import
guard first (binary torch builds: :mod:`.guard`), then imports the folder's own package
(``<variant>/__init__.py`` of a flat build, ``<variant>/<module>/__init__.py`` of a legacy
one) under the name ``<module>`` and puts it in its own place in ``sys.modules``, which
is how kernel-builder's compatibility sub-packages load a flat build too. The result is
the kernel's own module: its ``__file__``, ``__path__`` and submodules are the folder's.

The same folder is what ``kernels.get_local_kernel`` and ``LOCAL_KERNELS`` take
(``kernel-wheels local-kernels`` prints the mapping for an environment).
"""

from __future__ import annotations

from .guard import GUARD_MODULE
from .members import Member

LOADER_NAME = "__init__.py"

_LOADER = '''\
"""{module}: the kernel build {variant}, unchanged in the folder of that name beside this file.

Written by kernel-wheels. {guard}This module imports the folder's package as `{module}`,
so the kernel's own files stay what its metadata.json digests and the `kernels` library
can verify and load the folder too (see `kernel-wheels local-kernels`).
"""
{guard_import}
import importlib.util as _util
import os as _os
import sys as _sys

_package = _os.path.join(_os.path.dirname(__file__), {package!r})
_spec = _util.spec_from_file_location(__name__, _os.path.join(_package, "__init__.py"),
                                      submodule_search_locations=[_package])
_module = _util.module_from_spec(_spec)
_sys.modules[__name__] = _module
_spec.loader.exec_module(_module)
'''


def loader_member(module: str, variant: str, kind: str, guarded: bool) -> Member:
    """``<module>/__init__.py`` for the variant folder ``<module>/<variant>/`` of layout
    ``kind`` ("flat" or "legacy")."""
    package = variant if kind == "flat" else f"{variant}/{module}"
    text = _LOADER.format(
        module=module, variant=variant, package=package,
        guard="The import guard runs first:\nit checks that the running torch fits this build. "
        if guarded else "",
        guard_import=f"from . import {GUARD_MODULE}  # noqa: F401  (raises a clear ImportError)\n"
        if guarded else "")
    return Member(f"{module}/{LOADER_NAME}", content=text.encode())
