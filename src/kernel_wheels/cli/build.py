"""``kernel-wheels build``."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import Commands, add_command, positive_int, writable_folder


def register(commands: Commands) -> argparse.ArgumentParser:
    bd = add_command(
        commands, "build", help="compile a kernel-builder source tree for this environment's torch",
        description="Compile a kernel-builder source tree (build.toml) for the torch of the "
                    "running Python, as kernel-builder builds it: every backend build.toml lists "
                    "(cpu always; cuda when torch is a CUDA build and nvcc exists; noarch "
                    "kernels for every backend), each one independently. Writes "
                    "OUT/build/<variant>/ in the Hub's layout. Unchanged files are not compiled "
                    "again. Exit 0 when every backend built or was skipped, 1 when one failed.",
        epilog="examples:\n  kernel-wheels build sample-kernel -o out/build-output\n"
               "  kernel-wheels build ./my-kernel -o out --backend cuda --arch 9.0\n"
               "  TORCH_CUDA_ARCH_LIST='8.0;9.0+PTX' kernel-wheels build ./my-kernel -o out -j 8\n"
               "  kernel-wheels build ./my-kernel -o out --no-manylinux   # this machine only\n"
               "  kernel-wheels build ./my-kernel -o out --target-arch aarch64   # cpu kernels, cross\n")
    bd.add_argument("source_dir", type=Path, help="the kernel's source tree (holding build.toml)")
    bd.add_argument("-o", "--output-dir", type=Path, required=True,
                    help="where build/<variant>/ folders are written")
    bd.add_argument("--backend", action="append", default=[],
                    help="build only this backend (repeatable); failing to build it is an error")
    bd.add_argument("--arch", action="append", default=[], metavar="CAPABILITY",
                    help="compile CUDA code only for this capability, e.g. 9.0 or 9.0+PTX "
                         "(repeatable; default: TORCH_CUDA_ARCH_LIST, else kernel-builder's set)")
    bd.add_argument("-j", "--jobs", type=positive_int, default=0,
                    help="compilers run at once (default: every core)")
    bd.add_argument("--no-manylinux", action="store_true",
                    help="build for this machine's glibc instead of manylinux_2_28 (for a "
                         "toolchain newer than the manylinux_2_28 fixes reach); convert the "
                         "result with to-wheel --manylinux-version auto")
    bd.add_argument("--target-arch", choices=["x86_64", "aarch64"], default=None, metavar="ARCH",
                    help="build cpu kernels for another machine (x86_64 or aarch64) with a cross "
                         "compiler (aarch64-linux-gnu-g++, or CXX) and torch's wheel for it, "
                         "fetched from the package index pip uses")
    return bd


def run(args: argparse.Namespace) -> int:
    writable_folder(args.output_dir, "-o")  # before any work (a build takes minutes)
    from ..building.pipeline import BuildOptions, build

    options = BuildOptions(tuple(args.backend), args.jobs or None, tuple(args.arch),
                           manylinux=not args.no_manylinux, target_arch=args.target_arch)
    report = build(args.source_dir, args.output_dir, options, log=args.progress)
    for result in report.built:
        print(result.path)
    counts = {s: sum(r.status == s for r in report.results) for s in ("built", "skipped", "failed")}
    args.progress(f"{report.kernel}: {counts['built']} built, {counts['skipped']} skipped, "
                  f"{counts['failed']} failed")
    report.raise_for_failures()
    return 0
