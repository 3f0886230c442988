"""``kernel-wheels variants``."""

from __future__ import annotations

import argparse
import json

from .common import Commands, add_command, add_source_options, filters, network, print_table


def register(commands: Commands) -> argparse.ArgumentParser:
    va = add_command(
        commands, "variants", help="list a kernel's build variants with their parsed fields",
        description="List the build variants of a kernel at a version, with the fields "
                    "parsed from their names. SOURCE and VERSION work as for to-wheel.",
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
    add_source_options(va, filters=True)
    return va


def run(args: argparse.Namespace) -> int:
    from ..kernel.versions import parse_request
    from ..sources import open_source
    from ..sources.variant_list import list_variants

    request = parse_request(args.version, args.revision) \
        if args.version is not None or args.revision is not None else None
    chosen = filters(args)
    source = open_source(args.source, repo_type=args.repo_type, network=network(args),
                         progress=args.progress)
    found = list_variants(source, request, chosen)
    if args.json:
        print(json.dumps(found.to_dict(), indent=2))
        return 0
    if found.revision.commit:
        args.progress(f"{found.source} at {found.revision.ref} ({found.revision.commit})")
    header = ("variant", "framework", "version", "backend", "cxx", "arch", "os")
    rows = [(v.name, v.framework, v.framework_version_str or "-",
             f"{v.backend}" + (f" {v.backend_version}" if v.backend_version else ""),
             v.cxx_abi or "-", v.cpu_arch or "noarch", v.os or "any") for v in found.variants]
    print_table(header, rows)
    for name, reason in found.not_variants:
        args.progress(f"not a variant: build/{name} ({reason})")
    return 0

