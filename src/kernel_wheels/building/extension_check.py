"""What a linked extension must be before it becomes a variant (kernel-builder checks
the same after its builds): loadable as a Python module (``PyInit_<name>``) and within
the manylinux_2_28 symbol versions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection

from .. import data
from ..errors import BuildError
from .symbol_versions import over_limit


@dataclass(frozen=True)
class DynamicSymbols:
    defined: frozenset[str]
    #: (symbol, "GLIBCXX_3.4.29") for every undefined dynamic symbol with a version
    versioned_imports: tuple[tuple[str, str], ...]


def dynamic_symbols(path: Path) -> DynamicSymbols:
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        names: dict[int, str] = {}
        verneed = elf.get_section_by_name(".gnu.version_r")
        if isinstance(verneed, GNUVerNeedSection):
            for _library, auxiliaries in verneed.iter_versions():
                for aux in auxiliaries:
                    names[aux.entry.vna_other] = aux.name
        versym = elf.get_section_by_name(".gnu.version")
        dynsym: Any = elf.get_section_by_name(".dynsym")
        defined, imports = set(), []
        for index, symbol in enumerate(dynsym.iter_symbols() if dynsym is not None else ()):
            if not symbol.name:
                continue
            if symbol.entry.st_shndx != "SHN_UNDEF":
                defined.add(symbol.name)
            elif isinstance(versym, GNUVerSymSection):
                ndx = versym.get_symbol(index).entry["ndx"]
                if isinstance(ndx, int) and (ndx & 0x7FFF) in names:
                    imports.append((symbol.name, names[ndx & 0x7FFF]))
        return DynamicSymbols(frozenset(defined), tuple(imports))


def imports_of(extension: Path) -> tuple[tuple[str, str], ...]:
    return dynamic_symbols(extension).versioned_imports


def check_extension(extension: Path, ext_name: str, *, policy: bool = True,
                    tvm_ffi: bool = False) -> None:
    """``policy`` False (``--no-manylinux``) checks only that it is a Python module (for
    a tvm-ffi kernel: that it exports tvm-ffi functions)."""
    symbols = dynamic_symbols(extension)
    if tvm_ffi:
        if not any(name.startswith("__tvm_ffi_") for name in symbols.defined):
            raise BuildError(f"{extension.name} exports no tvm-ffi function: the sources must "
                             "export them with TVM_FFI_DLL_EXPORT_TYPED_FUNC")
    elif f"PyInit_{ext_name}" not in symbols.defined:
        raise BuildError(f"{extension.name} has no PyInit_{ext_name}: the binding sources must end "
                         "with REGISTER_EXTENSION(TORCH_EXTENSION_NAME) (from registration.h)")
    over = over_limit(symbols.versioned_imports) if policy else []
    if over:
        policy = data.load("build_toolchain")["manylinux"]
        listed = ", ".join(f"{s.version}: {s.symbol}" for s in over[:5])
        raise BuildError(f"{extension.name} needs symbol versions above {policy} ({listed}): "
                         "it would not load on the systems Hub kernels promise to support "
                         "(--no-manylinux builds for this machine only)")
