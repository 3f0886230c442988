"""The command line: parses arguments, calls the API, prints. No logic of its own."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .errors import KernelWheelsError

PROG = "kernel-wheels"

TO_WHEEL_EPILOG = """\
examples:
  kernel-wheels to-wheel drbh/img2gray 1.1.2                 # every variant of tag v1.1.2
  kernel-wheels to-wheel drbh/img2gray '>=1.1,<2' -o wheels  # newest matching tag
  kernel-wheels to-wheel drbh/img2gray 1                     # newest build on branch v1
  kernel-wheels to-wheel drbh/img2gray --revision 3f2a1b0    # any branch, tag or commit
  kernel-wheels to-wheel ./img2gray-repo 1.1.2 --variant 'torch213-*-cpu-*'
  kernel-wheels to-wheel ./build-output 1.1.2 --dist-name acme-img2gray --json

Moving from `kernels to-wheel REPO VERSION`: replace `kernels` with `kernel-wheels`;
--python-version and --manylinux-version work as before. Wheels are checked before
they are written (--no-check skips that).
"""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _add_filters(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("variant selection")
    group.add_argument("--variant", action="append", default=[], metavar="PATTERN",
                       help="glob on variant names, e.g. 'torch27-*-cu128-*' (repeatable)")
    group.add_argument("--torch", action="append", default=[], metavar="X.Y",
                       help="only variants for this torch version (repeatable)")
    group.add_argument("--backend", action="append", default=[], metavar="NAME",
                       help="only this backend: cuda, rocm, cpu, ... or cu128 (repeatable)")
    group.add_argument("--arch", action="append", default=[], metavar="ARCH",
                       help="only this CPU architecture: x86_64, aarch64 (repeatable)")
    group.add_argument("--os", action="append", default=[], metavar="OS",
                       help="only this OS: linux, darwin, windows (repeatable)")


def _filters(args: argparse.Namespace) -> Any:
    from .selection import VariantFilter

    return VariantFilter(tuple(args.variant), tuple(args.torch), tuple(args.backend),
                         tuple(args.arch), tuple(args.os))


def _add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo-type", choices=["kernel", "model"],
                        help="Hub repository type (default: try kernel, then model)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Turn prebuilt Hugging Face Hub kernels into validated, reproducible wheels.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'kernel-wheels COMMAND --help' for a command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    tw = commands.add_parser(
        "to-wheel", help="convert a kernel's build variants into wheels",
        description="Convert the build variants of a Hub kernel (a Hub repo id, a git "
                    "repository or URL, or a local folder holding build/) into one wheel "
                    "per variant.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=TO_WHEEL_EPILOG)
    tw.add_argument("source", help="Hub repo id (org/name), git repository path or URL, "
                                   "or a folder holding build/ or variant folders")
    tw.add_argument("version", nargs="?",
                    help="1.1.2 (tag v1.1.2), a range '>=1.1,<2', or a major version 1 "
                         "(branch v1); for a plain folder, the version to give the wheels")
    tw.add_argument("--revision", help="branch, tag or commit to convert (VERSION, if also "
                                       "given, becomes the wheel version)")
    tw.add_argument("-o", "--output-dir", type=Path, default=Path("."),
                    help="where to write the wheels (default: current folder)")
    tw.add_argument("--python-version", default="3.9",
                    help="minimum Python of the abi3 tag (default: 3.9)")
    tw.add_argument("--manylinux-version", default="2.28",
                    help="glibc version of the manylinux tag, or 'auto' for the lowest the "
                         "binaries meet (default: 2.28)")
    tw.add_argument("--macos-version", default="26.0",
                    help="macOS version of the macosx tag (default: 26.0)")
    tw.add_argument("--dist-name", help="distribution name to publish under (the import "
                                        "name never changes)")
    tw.add_argument("--force", action="store_true",
                    help="replace existing wheels of the same name with different content")
    tw.add_argument("--no-check", action="store_true",
                    help="write wheels without checking them (not recommended)")
    tw.add_argument("-j", "--jobs", type=int, default=0, help="variants converted at once")
    tw.add_argument("--json", action="store_true", help="print a JSON result on stdout")
    _add_filters(tw)
    _add_source(tw)

    ck = commands.add_parser(
        "check", help="check wheels against everything their names claim",
        description="Check RECORD hashes, METADATA and WHEEL, manylinux symbol versions "
                    "(torch's libraries excluded), architecture, RPATH, PyInit, the limited "
                    "API and metadata.json digests. Exit 0: all pass; 1: a check failed; "
                    "2: usage error.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  kernel-wheels check dist/*.whl\n  kernel-wheels check --json "
               "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl\n")
    ck.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    ck.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    ck.add_argument("-v", "--verbose", action="store_true", help="list passed checks too")

    va = commands.add_parser(
        "variants", help="list a kernel's build variants with their parsed fields",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  kernel-wheels variants drbh/img2gray --revision v1.1.2\n"
               "  kernel-wheels variants ./img2gray-repo --revision v1 --json\n")
    va.add_argument("source")
    va.add_argument("--revision", help="branch, tag or commit (default: main)")
    va.add_argument("--json", action="store_true")
    _add_filters(va)
    _add_source(va)

    bd = commands.add_parser(
        "build", help="compile a kernel-builder source tree for this environment's torch",
        description="Compile a kernel-builder source tree (build.toml) for the torch of the "
                    "running Python: the cpu backend always, cuda when torch is a CUDA build "
                    "and nvcc exists. Writes OUT/build/<variant>/ in the Hub's layout.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  kernel-wheels build sample-kernel -o out/build-output\n"
               "  kernel-wheels build ./my-kernel -o out --backend cuda\n")
    bd.add_argument("source_dir", type=Path)
    bd.add_argument("-o", "--output-dir", type=Path, required=True)
    bd.add_argument("--backend", action="append", default=[],
                    help="build only this backend (repeatable)")
    bd.add_argument("-j", "--jobs", type=int, default=0, help="compilers run at once")
    return parser


def _cmd_to_wheel(args: argparse.Namespace) -> int:
    from .convert import ConvertOptions, to_wheels
    from .plan import TagOptions
    from .sources import open_source
    from .versions import RequestKind, parse_request

    request = parse_request(args.version, args.revision)
    given = args.version if request.kind is RequestKind.REVISION else None
    auto = args.manylinux_version == "auto"
    options = ConvertOptions(
        output_dir=args.output_dir,
        tags=TagOptions(args.python_version, "2.28" if auto else args.manylinux_version,
                        args.macos_version),
        filters=_filters(args),
        dist_name=args.dist_name,
        version=given,
        force=args.force,
        check=not args.no_check,
        jobs=args.jobs,
        manylinux_auto=auto,
    )
    if args.no_check:
        _stderr("warning: --no-check: wheels are written WITHOUT checking that they are "
                "what their names claim")
    source = open_source(args.source, repo_type=args.repo_type)
    result = to_wheels(source, request, options, progress=_stderr)
    counts: dict[str, int] = {}
    for wheel in result.wheels:
        counts[wheel.status] = counts.get(wheel.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    _stderr(f"done: {len(result.wheels)} wheels of {result.source} {result.version} "
            f"in {args.output_dir} ({summary})")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from .checks import Status, check_wheel

    reports = [check_wheel(path) for path in args.wheels]
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2))
    else:
        for report in reports:
            verdict = "PASS" if report.passed else "FAIL"
            print(f"{verdict} {report.wheel}")
            for finding in report.findings:
                if finding.status is Status.PASS and not args.verbose:
                    continue
                print(f"  {finding.status.value}: [{finding.check}] {finding.message}")
    failed = sum(not r.passed for r in reports)
    _stderr(f"{len(reports) - failed} of {len(reports)} wheels passed")
    return 1 if failed else 0


def _cmd_variants(args: argparse.Namespace) -> int:
    from .selection import parse_folders
    from .sources import open_source
    from .versions import parse_request

    source = open_source(args.source, repo_type=args.repo_type)
    revision = source.resolve(parse_request(None, args.revision) if args.revision else None)
    variants, skipped = parse_folders(source.variant_names(revision))
    filters = _filters(args)
    variants = [v for v in variants if filters.matches(v)]
    if args.json:
        print(json.dumps({"source": source.display, "revision": revision.to_dict(),
                          "variants": [v.to_dict() for v in variants],
                          "not_variants": [{"folder": n, "reason": r} for n, r in skipped]},
                         indent=2))
        return 0
    if revision.commit:
        _stderr(f"{source.display} at {revision.ref} ({revision.commit})")
    header = ("variant", "framework", "version", "backend", "cxx", "arch", "os")
    rows = [(v.name, v.framework, v.framework_version_str or "-",
             f"{v.backend}" + (f" {v.backend_version}" if v.backend_version else ""),
             v.cxx_abi or "-", v.cpu_arch or "noarch", v.os or "any") for v in variants]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for name, reason in skipped:
        _stderr(f"not a variant: build/{name} ({reason})")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from .builder import build_kernel

    results = build_kernel(args.source_dir, args.output_dir, backends=args.backend or None,
                           jobs=args.jobs or None, log=_stderr)
    for built in results:
        print(built.path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {"to-wheel": _cmd_to_wheel, "check": _cmd_check, "variants": _cmd_variants,
                "build": _cmd_build}
    try:
        return handlers[args.command](args)
    except KernelWheelsError as exc:
        first, *rest = exc.message.splitlines() or [""]
        _stderr(f"{PROG}: error: {first}")
        for line in rest:  # compiler output after a build error
            _stderr(f"  {line}")
        return exc.exit_code
    except OSError as exc:  # the file system said no: a full disk, a read-only folder...
        where = f": {exc.filename}" if exc.filename else ""
        _stderr(f"{PROG}: error: {exc.strerror or exc}{where}")
        return 1
    except KeyboardInterrupt:
        _stderr(f"{PROG}: interrupted")
        return 130
