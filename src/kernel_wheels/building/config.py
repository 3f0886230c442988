"""kernel-builder's ``build.toml`` (edition 5 and the edition before it) read into a
:class:`BuildConfig`.

Every key is checked against ``data/build_toml.json``: a key kernel-builder does not
know, a value of the wrong kind, a missing required key or a key of another edition is
an error that names the key. Nothing in the file is silently ignored.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import data
from ..confine import read_regular, shown
from ..errors import BuildError
from ..kernel.metadata import KernelDependency
from ..kernel.repo_id import is_repo_id
from ..reading import NestingError, parse_toml
from .flags import Kind, refused_flag
from .tree import check_folder, package_files, tree_path

NAME_PATTERN = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
VERSION_PATTERN = re.compile(r"^\d+(\.\d+)*$")
TORCH_EXT = "torch-ext"
TVM_FFI_EXT = "tvm-ffi-ext"


def version_tuple(text: str) -> tuple[int, ...]:
    """``"2.12"`` -> ``(2, 12)``, trailing zeros dropped as kernel-builder normalises them."""
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@dataclass(frozen=True)
class KernelComponent:
    """One ``[kernel.<id>]`` table: sources compiled into one backend's extension."""

    id: str
    backend: str
    src: tuple[str, ...]
    depends: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_capabilities: tuple[str, ...] | None = None
    cuda_flags: tuple[str, ...] = ()
    cuda_minver: str | None = None
    rocm_archs: tuple[str, ...] | None = None
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"[kernel.{self.id}]"


@dataclass(frozen=True)
class BackendGeneral:
    """``[general.<backend>]``: per-backend dependencies and (CUDA) version bounds."""

    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[KernelDependency, ...] = ()
    minver: str | None = None
    maxver: str | None = None


@dataclass(frozen=True)
class Framework:
    """The framework section: ``torch``, ``torch-noarch`` or ``tvm-ffi``."""

    kind: str
    src: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    pyext: tuple[str, ...] | None = None
    cxx_flags: tuple[str, ...] = ()
    minver: str | None = None
    maxver: str | None = None
    #: backend -> torch version its stable-ABI build targets ("2.11"); empty: none.
    stable_abi: dict[str, str] = field(default_factory=dict)
    #: torch-noarch only: archs written into metadata.json.
    cuda_capabilities: tuple[str, ...] | None = None
    rocm_archs: tuple[str, ...] | None = None

    @property
    def ext_dir(self) -> str:
        """Where the binding sources and the Python package live."""
        return TVM_FFI_EXT if self.kind == "tvm-ffi" else TORCH_EXT

    def data_extensions(self) -> tuple[str, ...]:
        """Extensions of the non-Python files shipped with the package (kernel-builder's
        ``pyext`` minus ``py`` and ``pyi``)."""
        return tuple(e for e in (self.pyext or ()) if e not in ("py", "pyi"))


@dataclass(frozen=True)
class BuildConfig:
    root: Path
    name: str
    version: int
    edition: int  # 5, or 4 for the edition without an edition key
    license: str
    upstream: str | None
    source: str | None
    backends: tuple[str, ...]
    python_depends: tuple[str, ...]
    kernel_depends: tuple[KernelDependency, ...]
    framework: Framework
    kernels: tuple[KernelComponent, ...]
    per_backend: dict[str, BackendGeneral]
    hub_repo_id: str | None = None

    @property
    def module_name(self) -> str:
        return self.name.replace("-", "_")

    @property
    def noarch(self) -> bool:
        return self.framework.kind == "torch-noarch"

    @property
    def torch_src(self) -> tuple[str, ...]:
        return self.framework.src

    @property
    def package_dir(self) -> Path:
        return self.root / self.framework.ext_dir / self.module_name

    def components(self, backend: str) -> tuple[KernelComponent, ...]:
        return tuple(k for k in self.kernels if k.backend == backend)

    def backend_general(self, backend: str) -> BackendGeneral:
        return self.per_backend.get(backend, BackendGeneral())

    def all_python_depends(self, backend: str) -> tuple[str, ...]:
        return self.python_depends + self.backend_general(backend).python_depends

    def all_kernel_depends(self, backend: str) -> tuple[KernelDependency, ...]:
        return self.kernel_depends + self.backend_general(backend).kernel_depends

    def source_files(self) -> list[Path]:
        """Every file that can change a build's result, for the ops-namespace hash."""
        files = {self.root / "build.toml"}
        files.update(self.root / s for s in self.framework.src)
        for component in self.kernels:
            files.update(self.root / s for s in component.src)
        if self.package_dir.is_dir():
            files.update(p for p, _ in package_files(self.root, self.package_dir) if p.suffix != ".pyc")
        return sorted(files)


# --- reading -------------------------------------------------------------------------


class _Reader:
    """Checks one parsed document against the key table, naming the key on error."""

    def __init__(self, path: Path, edition: int) -> None:
        self.schema: dict[str, Any] = data.load("build_toml")
        self.path = path
        self.edition = edition

    def fail(self, where: str, message: str) -> BuildError:
        return BuildError(f"{self.path.name}: {where} {message}")

    def check_keys(self, table: dict[str, Any], schema_name: str, where: str,
                   backend: str | None = None) -> None:
        allowed: dict[str, str] = self.schema["tables"][schema_name]
        for key in table:
            dotted = f"{schema_name}.{key}"
            if dotted in self.schema["legacy"]:
                raise self.fail(f"{where} {key}",
                                f"is kernel-builder's {self.schema['legacy'][dotted]} form, which "
                                "kernel-builder no longer reads either: migrate the file with "
                                "`kernel-builder update-build` (edition 5)")
            if key not in allowed:
                raise self.fail(f"{where} {key}", "is not a build.toml key (kernel-builder's edition 5 "
                                "has no such key): remove or correct it")
            if self.edition == 4 and dotted in self.schema["only_in_edition_5"]:
                raise self.fail(f"{where} {key}", "needs edition 5: add `edition = 5` to [general]")
            owners = self.schema["kernel_backend_keys"].get(key) if schema_name == "kernel" else None
            if owners is not None and backend not in owners:
                raise self.fail(f"{where} {key}",
                                f"is a key of {'/'.join(owners)} kernels, not of a {backend} kernel")
        for key in self.schema["required"].get(schema_name, []):
            if key not in table:
                raise self.fail(f"{where} {key}", "is missing (kernel-builder requires it)")
        for key, value in table.items():
            self.check_value(value, allowed[key], f"{where} {key}")

    def check_value(self, value: Any, kind: str, where: str) -> None:
        ok: bool
        if kind in ("string", "name", "kernel-backend"):
            ok = isinstance(value, str)
        elif kind == "integer":
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        elif kind in ("strings", "backends"):
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        elif kind == "version":
            ok = isinstance(value, str) and bool(VERSION_PATTERN.match(value.strip()))
        elif kind == "table":
            ok = isinstance(value, dict)
        elif kind == "kernel-depends":
            ok = isinstance(value, list) and all(isinstance(v, dict) for v in value)
        elif kind == "stable-abi":
            ok = isinstance(value, (str, dict))
        else:  # pragma: no cover - the table names only the kinds above
            raise AssertionError(kind)
        if not ok:
            expected = {"strings": "a list of strings", "backends": "a list of backend names",
                        "version": 'a version string such as "2.12"', "integer": "a whole number",
                        "table": "a table", "kernel-depends":
                        'a list of tables {repo-id = "org/name", version = N}',
                        "stable-abi": 'a torch version ("2.11") or a table {backend = "2.11"}'}
            raise self.fail(where, f"must be {expected.get(kind, 'a string')}, not "
                            f"{shown(repr(value), 80)}")
        if kind == "name" and not NAME_PATTERN.match(value):
            raise self.fail(where, f"'{shown(value, 80)}' is not a valid kernel name (lowercase letters, "
                            "digits and dashes, starting with a letter, e.g. my-kernel)")
        if kind == "backends":
            for backend in value:
                if backend not in self.schema["backends"]:
                    raise self.fail(where, f"'{backend}' is not a backend (one of "
                                    f"{', '.join(self.schema['backends'])})")
        if kind == "kernel-backend" and value not in self.schema["kernel_backends"]:
            raise self.fail(where, f"'{value}' is not a kernel backend (one of "
                            f"{', '.join(self.schema['kernel_backends'])})")

    def kernel_depends(self, value: list[dict[str, Any]], where: str) -> tuple[KernelDependency, ...]:
        result = []
        for entry in value:
            unknown = set(entry) - {"repo-id", "version", "revision"}
            if unknown:
                raise self.fail(where, f"entry has unknown key {sorted(unknown)[0]}")
            repo, version, revision = entry.get("repo-id"), entry.get("version"), entry.get("revision")
            if not isinstance(repo, str):
                raise self.fail(where, "entry needs repo-id = \"org/name\"")
            if (version is None) == (revision is None):
                raise self.fail(where, f"entry for {repo} needs exactly one of version or revision")
            if version is not None and not isinstance(version, int):
                raise self.fail(where, f"entry for {repo}: version must be a whole number")
            if revision is not None and not isinstance(revision, str):
                raise self.fail(where, f"entry for {repo}: revision must be a string")
            result.append(KernelDependency(repo, version, revision))
        return tuple(result)


def _strings(table: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(table.get(key, ()))


def _optional_strings(table: dict[str, Any], key: str) -> tuple[str, ...] | None:
    return tuple(table[key]) if key in table else None


def _python_depends_check(reader: _Reader, names: tuple[str, ...], backend: str | None,
                          where: str) -> None:
    known: dict[str, Any] = data.load("python_depends")
    table = known["general"] if backend is None else known["backends"].get(backend, {})
    for name in names:
        if name not in table:
            choices = ", ".join(sorted(table)) or "none"
            raise reader.fail(where, f"'{name}' is not a python-depends name kernel-builder knows "
                              f"{'in general' if backend is None else f'for {backend}'} "
                              f"(known: {choices})")


#: the flag keys of build.toml and the compiler driver each one reaches
_FLAG_KEYS: tuple[tuple[str, Kind], ...] = (
    ("cxx-flags", "compiler"), ("cuda-flags", "nvcc"), ("hip-flags", "compiler"),
    ("sycl-flags", "compiler"))


def _check_flags(reader: _Reader, table: dict[str, Any], where: str) -> None:
    """Options that would let the tree run programs or write elsewhere (see .flags)."""
    for key, kind in _FLAG_KEYS:
        if key in table and (refused := refused_flag(table[key], kind)) is not None:
            raise reader.fail(f"{where} {key}", refused.message())


def _check_paths(source_dir: Path, framework: Framework, kernels: tuple[KernelComponent, ...]) -> None:
    """Every file and folder build.toml names is the tree's own (see .tree)."""
    check_folder(source_dir, "csrc")  # on every include path, unnamed
    named = [(f"[{framework.kind}]", framework.src, framework.include),
             *((k.where, k.src, k.include) for k in kernels)]
    for where, sources, includes in named:
        for name in sources:
            if not tree_path(source_dir, name, f"{where} src").is_file():
                raise BuildError(f"build.toml names {name}, which does not exist in {source_dir}")
        for name in includes:
            tree_path(source_dir, name, f"{where} include")


def _framework(reader: _Reader, doc: dict[str, Any]) -> Framework:
    present = [k for k in ("torch", "torch-noarch", "tvm-ffi") if k in doc]
    if not present:
        raise reader.fail("[torch], [torch-noarch] or [tvm-ffi]",
                          "is missing: build.toml needs exactly one framework section")
    if len(present) > 1:
        raise reader.fail(f"[{present[0]}] and [{present[1]}]",
                          "are both present: build.toml needs exactly one framework section")
    kind = present[0]
    table = doc[kind]
    if not isinstance(table, dict):
        raise reader.fail(f"[{kind}]", "must be a table")
    reader.check_keys(table, kind, f"[{kind}]")
    _check_flags(reader, table, f"[{kind}]")
    stable: dict[str, str] = {}
    if "stable-abi" in table:
        value = table["stable-abi"]
        if isinstance(value, str):
            reader.check_value(value, "version", f"[{kind}] stable-abi")
            stable = {b: value for b in data.load("build_toml")["backends"]}
        elif reader.edition == 4:
            raise reader.fail("[torch] stable-abi", "as a per-backend table needs edition 5: "
                              "add `edition = 5` to [general]")
        else:
            for backend, version in value.items():
                if backend not in data.load("build_toml")["backends"]:
                    raise reader.fail(f"[torch.stable-abi] {backend}", "is not a backend")
                reader.check_value(version, "version", f"[torch.stable-abi] {backend}")
            stable = dict(value)
        for backend, version in stable.items():
            if len(version_tuple(version)) > 2 or version_tuple(version) < (2, 0):
                raise reader.fail("[torch] stable-abi", f"'{version}' for {backend} must be a torch "
                                  "major.minor version such as \"2.11\"")
    return Framework(
        kind=kind, src=_strings(table, "src"), include=_strings(table, "include"),
        pyext=_optional_strings(table, "pyext"), cxx_flags=_strings(table, "cxx-flags"),
        minver=table.get("minver"), maxver=table.get("maxver"), stable_abi=stable,
        cuda_capabilities=_optional_strings(table, "cuda-capabilities"),
        rocm_archs=_optional_strings(table, "rocm-archs"))


def _component(reader: _Reader, kernel_id: str, table: Any) -> KernelComponent:
    where = f"[kernel.{kernel_id}]"
    if not isinstance(table, dict):
        raise reader.fail(where, "must be a table")
    backend = table.get("backend")
    reader.check_keys(table, "kernel", where, backend=backend if isinstance(backend, str) else None)
    _check_flags(reader, table, where)
    known: dict[str, Any] = data.load("build_depends")
    for dependency in table["depends"]:
        if dependency not in known or dependency.startswith("_"):
            raise reader.fail(f"{where} depends", f"'{dependency}' is not a dependency kernel-builder "
                              f"knows (known: {', '.join(k for k in sorted(known) if k[0] != '_')})")
    return KernelComponent(
        id=kernel_id, backend=table["backend"], src=_strings(table, "src"),
        depends=_strings(table, "depends"), include=_strings(table, "include"),
        cxx_flags=_strings(table, "cxx-flags"),
        cuda_capabilities=_optional_strings(table, "cuda-capabilities"),
        cuda_flags=_strings(table, "cuda-flags"), cuda_minver=table.get("cuda-minver"),
        rocm_archs=_optional_strings(table, "rocm-archs"), hip_flags=_strings(table, "hip-flags"),
        sycl_flags=_strings(table, "sycl-flags"))


def _backend_general(reader: _Reader, general: dict[str, Any]) -> dict[str, BackendGeneral]:
    result: dict[str, BackendGeneral] = {}
    for backend in ("cuda", "neuron", "tpu", "xpu"):
        if backend not in general:
            continue
        where = f"[general.{backend}]"
        table = general[backend]
        reader.check_keys(table, f"general.{backend}", where)
        python = _strings(table, "python-depends")
        _python_depends_check(reader, python, backend, f"{where} python-depends")
        result[backend] = BackendGeneral(
            python_depends=python,
            kernel_depends=reader.kernel_depends(table.get("kernel-depends", []),
                                                 f"{where} kernel-depends"),
            minver=table.get("minver"), maxver=table.get("maxver"))
    return result


def read_build_toml(source_dir: Path) -> BuildConfig:
    path = source_dir / "build.toml"
    if not path.is_file():
        raise BuildError(f"{source_dir} is not a kernel source tree: it has no build.toml")
    try:
        doc = parse_toml(read_regular(path, "the build file", BuildError).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BuildError(f"{path}: not valid TOML: {shown(str(exc), 200)}") from None
    except NestingError:  # nested past MAX_DEPTH, refused before the parser recursed
        raise BuildError(f"{path}: nested too deeply to be a build.toml") from None
    general = doc.get("general")
    if not isinstance(general, dict):
        raise BuildError(f"{path}: [general] is missing")
    edition = general.get("edition", 4)
    if edition not in (4, 5) or ("edition" in general and edition != 5):
        raise BuildError(f"{path.name}: [general] edition {edition!r} is not one kernel-wheels reads "
                         "(edition 5, or no edition key for the edition before it)")
    reader = _Reader(path, edition)
    for key in doc:
        if key not in ("general", "kernel", "torch", "torch-noarch", "tvm-ffi"):
            raise reader.fail(f"[{key}]", "is not a build.toml table (kernel-builder's edition 5 has "
                              "[general], [torch], [torch-noarch], [tvm-ffi] and [kernel.<id>])")
    reader.check_keys(general, "general", "[general]")
    hub = general.get("hub", {})
    reader.check_keys(hub, "general.hub", "[general.hub]")
    if "repo-id" in hub and not is_repo_id(hub["repo-id"]):
        raise reader.fail("[general.hub] repo-id", f"{shown(repr(hub['repo-id']))} is not a Hub "
                          "repository id (org/name)")
    python_depends = _strings(general, "python-depends")
    _python_depends_check(reader, python_depends, None, "[general] python-depends")
    framework = _framework(reader, doc)
    kernels_table = doc.get("kernel", {})
    if not isinstance(kernels_table, dict):
        raise reader.fail("[kernel]", "must be a table of [kernel.<id>] tables")
    kernels = tuple(_component(reader, kid, table) for kid, table in sorted(kernels_table.items()))
    if framework.kind == "torch-noarch" and kernels:
        raise reader.fail(f"[kernel.{kernels[0].id}]", "cannot go with [torch-noarch]: a noarch "
                          "kernel compiles nothing")
    _check_paths(source_dir, framework, kernels)
    return BuildConfig(
        root=source_dir, name=general["name"], version=general["version"], edition=edition,
        license=general["license"], upstream=general.get("upstream"), source=general.get("source"),
        backends=tuple(general["backends"]), python_depends=python_depends,
        kernel_depends=reader.kernel_depends(general.get("kernel-depends", []),
                                             "[general] kernel-depends"),
        framework=framework, kernels=kernels, per_backend=_backend_general(reader, general),
        hub_repo_id=hub.get("repo-id"))
