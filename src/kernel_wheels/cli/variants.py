"""``kernel-wheels variants``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import add_filters, add_network, add_source, filters, network


def register(commands: Any) -> argparse.ArgumentParser:
    va: argparse.ArgumentParser = commands.add_parser(
        "variants", help="list a kernel's build variants with their parsed fields",
        description="List the build variants of a kernel at a version, with the fields "
                    "parsed from their names. SOURCE and VERSION work as for to-wheel.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  kernel-wheels variants drbh/img2gray 1.1.2\n"
               "  kernel-wheels variants drbh/img2gray --revision v1.1.2 --backend cuda\n"
               "  kernel-wheels variants ./img2gray-repo 1 --json\n")
    va.add_argument("source", help="Hub repo id (org/name), git repository path or URL, "
                                   "or a folder holding build/ or variant folders")
    va.add_argument("version", nargs="?",
                    help="1.1.2 (tag v1.1.2), a range '>=1.1,<2', or a major version 1 "
                         "(branch v1); default: the default branch")
    va.add_argument("--revision", help="branch, tag or commit (default: the default branch)")
    va.add_argument("--json", action="store_true", help="print JSON on stdout")
    add_filters(va)
    add_source(va)
    add_network(va)
    return va


def run(args: argparse.Namespace) -> int:
    from ..kernel.selection import parse_folders
    from ..kernel.versions import parse_request
    from ..sources import open_source

    request = parse_request(args.version, args.revision) \
        if args.version is not None or args.revision is not None else None
    chosen = filters(args)
    source = open_source(args.source, repo_type=args.repo_type, network=network(args),
                         progress=args.progress)
    revision = source.resolve(request)
    variants, skipped = parse_folders(source.variant_names(revision))
    variants = [v for v in variants if chosen.matches(v)]
    if args.json:
        print(json.dumps({"source": source.display, "revision": revision.to_dict(),
                          "variants": [v.to_dict() for v in variants],
                          "not_variants": [{"folder": n, "reason": r} for n, r in skipped]},
                         indent=2))
        return 0
    if revision.commit:
        args.progress(f"{source.display} at {revision.ref} ({revision.commit})")
    header = ("variant", "framework", "version", "backend", "cxx", "arch", "os")
    rows = [(v.name, v.framework, v.framework_version_str or "-",
             f"{v.backend}" + (f" {v.backend_version}" if v.backend_version else ""),
             v.cxx_abi or "-", v.cpu_arch or "noarch", v.os or "any") for v in variants]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for name, reason in skipped:
        args.progress(f"not a variant: build/{name} ({reason})")
    return 0
