"""`kernel-wheels build` on hosts newer than the manylinux_2_28 promise (issue #23).

A modern build machine's toolchain (gcc 13+, glibc 2.36+) makes binaries that import
glibc symbols newer than 2.28: libm's exp@GLIBC_2.29, stat@GLIBC_2.33,
__libc_single_threaded@GLIBC_2.32, arc4random@GLIBC_2.36 and glibc 2.38's
__isoc23_strtoul (what strtoul becomes in C++). The test kernel kw-glibc calls each of
them. This machine's glibc (2.36) has all but the last for real; __isoc23_strtoul comes
from a stand-in library built here, which exports it at GLIBC_2.38 exactly as glibc
does, and which a compiler wrapper ($CXX) adds to the extension's link. The build must
bind or define every one of them so that nothing above GLIBC_2.28 is imported, the
stand-in is no longer needed, `check` passes the wheel as manylinux_2_28, and the ops
run.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from kernel_wheels.building.symbol_versions import over_limit
from support.elf_oracle import dynamic_symbols
from support.helpers import run_cli

KERNELS = Path(__file__).parent / "kernels"
FLAT_CPU = "torch213-cxx11-cpu-x86_64-linux"

# glibc 2.38's C23 strtoul, as a stand-in. Returning a wrong number on purpose: a
# result of 999 would mean the extension still called the stand-in.
STANDIN_SOURCE = "unsigned long __isoc23_strtoul(const char* s, char** e, int b) { return 999; }\n"
STANDIN_VERSIONS = "GLIBC_2.38 { global: __isoc23_strtoul; local: *; };\n"
WRAPPER = """#!/bin/sh
# g++, plus the stand-in library on every shared link (where the extension is linked).
for argument in "$@"; do
  if [ "$argument" = "-shared" ]; then exec g++ "$@" -L{folder} -lkw_glibc_standin; fi
done
exec g++ "$@"
"""


def load_and_run(build_output: Path, code: str) -> str:
    """Run ``code`` with ``kernel`` = kernels.get_local_kernel(build_output)."""
    program = ("import sys, torch\nfrom pathlib import Path\nfrom kernels import get_local_kernel\n"
               "kernel = get_local_kernel(Path(sys.argv[1]))\n" + code)
    proc = subprocess.run([sys.executable, "-c", program, str(build_output)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def standin_cxx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A $CXX that links every extension against libkw_glibc_standin.so (GLIBC_2.38)."""
    folder = tmp_path_factory.mktemp("glibc-standin")
    (folder / "standin.c").write_text(STANDIN_SOURCE)
    (folder / "standin.map").write_text(STANDIN_VERSIONS)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / "libkw_glibc_standin.so"),
                    str(folder / "standin.c"), f"-Wl,--version-script={folder / 'standin.map'}"],
                   check=True, capture_output=True)
    wrapper = folder / "g++"
    wrapper.write_text(WRAPPER.replace("{folder}", str(folder)))
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture(scope="module")
def glibc_build(standin_cxx: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("kw-glibc")
    proc = run_cli("build", KERNELS / "kw-glibc", "-o", out, check=False,
                   env={"CXX": str(standin_cxx),
                        "KERNEL_WHEELS_CACHE": str(tmp_path_factory.mktemp("cache"))})
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_newer_glibc_symbols_are_bound_or_defined_inside(
        glibc_build: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = glibc_build
    assert ("cpu: bound to older glibc versions: __isoc23_strtoul -> strtoul@GLIBC_2.2.5, "
            "exp@GLIBC_2.2.5") in proc.stderr
    assert ("cpu: defined inside the extension (glibc_compat.c): __libc_single_threaded "
            "(GLIBC_2.32), arc4random (GLIBC_2.36), stat (GLIBC_2.33)") in proc.stderr
    so = next((out / "build" / FLAT_CPU).glob("*.abi3.so"))
    symbols = dynamic_symbols(so)
    assert over_limit(symbols.versioned_imports) == []
    imported = dict(symbols.versioned_imports)
    assert imported["strtoul"] == "GLIBC_2.2.5" and imported["exp"] == "GLIBC_2.2.5"
    for name in ("__isoc23_strtoul", "__libc_single_threaded", "arc4random", "stat"):
        assert name not in imported, name
    assert sorted(symbols.defined) == [f"PyInit_{so.name.split('.')[0]}"]  # nothing else exported
    with so.open("rb") as stream:
        elf = ELFFile(stream)
        needed = {tag.needed for tag in elf.get_section_by_name(".dynamic").iter_tags()
                  if tag.entry.d_tag == "DT_NEEDED"}
        local = {s.name: s for s in elf.get_section_by_name(".symtab").iter_symbols()
                 if s.name in ("__libc_single_threaded", "arc4random", "stat")}
    assert "libkw_glibc_standin.so" not in needed  # nothing calls the stand-in any more
    assert set(local) == {"__libc_single_threaded", "arc4random", "stat"}
    for symbol in local.values():  # defined in the extension, visible to it alone
        assert symbol["st_shndx"] != "SHN_UNDEF" and symbol["st_info"]["bind"] == "STB_LOCAL"


def test_the_result_converts_as_manylinux_2_28_and_runs(
        glibc_build: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    out, _ = glibc_build
    run_cli("to-wheel", out, "1.0.0", "-o", tmp_path / "wheels")
    wheel = next((tmp_path / "wheels").iterdir())
    assert wheel.name == "kw_glibc-1.0.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    report = run_cli("check", "-v", wheel).stdout
    assert report.startswith(f"PASS {wheel.name}")
    assert "pass: [manylinux] manylinux_2_28_x86_64 holds" in report
    sized = tmp_path / "sized.bin"
    sized.write_bytes(b"x" * 1234)
    values = load_and_run(out, f"""
print(kernel.parse_unsigned("0x1f"), kernel.parse_unsigned("0b101"), kernel.single_threaded())
print(kernel.exponential(1.0))
print(kernel.file_size({str(sized)!r}), kernel.file_size({str(tmp_path / "missing")!r}))
print(len({{kernel.random_word() for _ in range(16)}}))
print(kernel.MODULE_FILE)
""").split()
    # 0b101 reads as 0 with C99's strtoul (the C23 one would read 5), never 999 (the stand-in)
    assert values[:3] == ["31", "0", "0"]
    assert float(values[3]) == math.e
    assert values[4:6] == ["1234", "-1"]
    assert int(values[6]) > 12  # 16 draws of 32 random bits: a repeat is already rare
    assert values[7] == "kw_glibc.py"  # the flat layout: the kernel's own module, not a folder


def test_without_the_fixes_the_build_names_the_symbols(standin_cxx: Path, tmp_path: Path) -> None:
    """--no-manylinux links for this machine only: the same symbols stay imported."""
    out = tmp_path / "out"
    run_cli("build", KERNELS / "kw-glibc", "-o", out, "--no-manylinux",
            env={"CXX": str(standin_cxx), "KERNEL_WHEELS_CACHE": str(tmp_path / "cache")})
    so = next((out / "build" / FLAT_CPU).glob("*.abi3.so"))
    over = {(s.symbol, s.version) for s in over_limit(dynamic_symbols(so).versioned_imports)}
    assert over == {("__isoc23_strtoul", "GLIBC_2.38"), ("arc4random", "GLIBC_2.36"),
                    ("__libc_single_threaded", "GLIBC_2.32"), ("stat", "GLIBC_2.33"),
                    ("exp", "GLIBC_2.29")}


CHROOTED_WRAPPER = """#!/bin/sh
# g++, whose dependency file also names a header that exists only where the compiler
# runs (as a compiler in a chroot or container reports its own /usr/include).
g++ "$@" || exit $?
previous=
for argument in "$@"; do
  if [ "$previous" = "-MF" ]; then echo "extra: /nonexistent-kw-root/usr/include/kw.h" >> "$argument"; fi
  previous=$argument
done
"""


def test_a_dependency_only_the_compiler_sees_is_not_an_error(tmp_path: Path) -> None:
    """The object is used but not cached (it could never be checked later)."""
    wrapper = tmp_path / "g++"
    wrapper.write_text(CHROOTED_WRAPPER)
    wrapper.chmod(0o755)
    env = {"CXX": str(wrapper), "KERNEL_WHEELS_CACHE": str(tmp_path / "cache")}
    for out in ("out", "again"):
        proc = run_cli("build", KERNELS / "kw-to-chars", "-o", tmp_path / out, env=env)
        assert "(unchanged)" not in proc.stderr and "Traceback" not in proc.stderr
        assert (tmp_path / out / "build" / "torch-stable-abi211-cpu-x86_64-linux").is_dir()
