"""What a linked extension must be before it becomes a variant (kernel-builder checks
the same after its builds): loadable as a Python module (``PyInit_<name>``) and within
the manylinux_2_28 symbol versions."""

from __future__ import annotations

from pathlib import Path

from .. import data
from ..elf.reader import ElfError, ElfInfo, read_elf
from ..errors import BuildError
from .symbol_versions import over_limit


def _read(extension: Path) -> ElfInfo:
    """The linked extension, read by the same ELF reader as ``check`` reads wheels."""
    try:
        return read_elf(extension, extension.name)
    except ElfError as exc:
        raise BuildError(f"the linker wrote an unreadable {extension.name}: {exc}") from None


def imports_of(extension: Path) -> tuple[tuple[str, str], ...]:
    """(symbol, "GLIBCXX_3.4.29") for every undefined dynamic symbol with a version."""
    return _read(extension).versioned_imports


def check_extension(extension: Path, ext_name: str, *, policy: bool = True,
                    tvm_ffi: bool = False) -> None:
    """``policy`` False (``--no-manylinux``) checks only that it is a Python module (for
    a tvm-ffi kernel: that it exports tvm-ffi functions)."""
    symbols = _read(extension)
    if tvm_ffi:
        if not any(name.startswith("__tvm_ffi_") for name in symbols.init_functions):
            raise BuildError(f"{extension.name} exports no tvm-ffi function: the sources must "
                             "export them with TVM_FFI_DLL_EXPORT_TYPED_FUNC")
    elif f"PyInit_{ext_name}" not in symbols.init_functions:
        raise BuildError(f"{extension.name} has no PyInit_{ext_name}: the binding sources must end "
                         "with REGISTER_EXTENSION(TORCH_EXTENSION_NAME) (from registration.h)")
    over = over_limit(symbols.versioned_imports) if policy else []
    if over:
        policy = data.load("build_toolchain")["manylinux"]
        listed = ", ".join(f"{s.version}: {s.symbol}" for s in over[:5])
        raise BuildError(f"{extension.name} needs symbol versions above {policy} ({listed}): "
                         "it would not load on the systems Hub kernels promise to support "
                         "(--no-manylinux builds for this machine only)")
