"""Reading kernel-builder's ``build.toml`` into a :class:`BuildConfig`."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BuildError

KNOWN_BACKENDS = ("cpu", "cuda", "rocm", "metal", "xpu")
DEFAULT_CUDA_CAPABILITIES = ("8.0", "9.0+PTX")


@dataclass(frozen=True)
class KernelComponent:
    """One ``[kernel.<id>]`` table: sources compiled into one backend's extension."""

    id: str
    backend: str
    src: tuple[str, ...]
    depends: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    cuda_capabilities: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildConfig:
    root: Path
    name: str
    version: int | None
    license: str | None
    upstream: str | None
    python_depends: tuple[str, ...]
    backends: tuple[str, ...]
    torch_src: tuple[str, ...]
    kernels: tuple[KernelComponent, ...]
    noarch: bool

    @property
    def module_name(self) -> str:
        return self.name.replace("-", "_")

    def components(self, backend: str) -> tuple[KernelComponent, ...]:
        return tuple(k for k in self.kernels if k.backend == backend)

    def source_files(self) -> list[Path]:
        """Every file that can change a build's result, for the ops-namespace hash."""
        files = {self.root / "build.toml"}
        files.update(self.root / s for s in self.torch_src)
        for component in self.kernels:
            files.update(self.root / s for s in component.src)
        package = self.root / "torch-ext" / self.module_name
        if package.is_dir():
            files.update(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        return sorted(files)


def _strings(table: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BuildError(f"build.toml: {where}.{key} must be a list of strings")
    return tuple(value)


def read_build_toml(source_dir: Path) -> BuildConfig:
    path = source_dir / "build.toml"
    if not path.is_file():
        raise BuildError(f"{source_dir} is not a kernel source tree: it has no build.toml")
    try:
        doc = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BuildError(f"{path}: not valid TOML: {exc}") from None
    general = doc.get("general")
    if not isinstance(general, dict) or not isinstance(general.get("name"), str):
        raise BuildError(f"{path}: [general] name is missing")

    kernels = []
    for kernel_id, table in sorted(doc.get("kernel", {}).items()):
        where = f"kernel.{kernel_id}"
        backend = table.get("backend", "cuda")  # the blog's older form has no backend key
        if backend not in KNOWN_BACKENDS:
            raise BuildError(f"build.toml: {where}.backend '{backend}' is not one of {KNOWN_BACKENDS}")
        kernels.append(
            KernelComponent(
                id=kernel_id,
                backend=backend,
                src=_strings(table, "src", where),
                depends=_strings(table, "depends", where),
                include=_strings(table, "include", where),
                cuda_capabilities=_strings(table, "cuda-capabilities", where),
                cuda_flags=_strings(table, "cuda-flags", where),
                cxx_flags=_strings(table, "cxx-flags", where),
            )
        )

    noarch = "torch-noarch" in doc
    backends = _strings(general, "backends", "general")
    if not backends:  # older form: backends implied by the kernel components
        backends = tuple(sorted({k.backend for k in kernels})) or ("cpu",)
    torch_table = doc.get("torch", {})
    for name in (*torch_table.get("src", []), *(s for k in kernels for s in k.src)):
        if not (source_dir / name).is_file():
            raise BuildError(f"build.toml names {name}, which does not exist in {source_dir}")
    version = general.get("version")
    return BuildConfig(
        root=source_dir,
        name=general["name"],
        version=version if isinstance(version, int) else None,
        license=general.get("license"),
        upstream=general.get("upstream"),
        python_depends=_strings(general, "python-depends", "general"),
        backends=backends,
        torch_src=_strings(torch_table, "src", "torch"),
        kernels=tuple(kernels),
        noarch=noarch,
    )
