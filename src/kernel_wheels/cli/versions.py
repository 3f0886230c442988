"""``kernel-wheels versions``."""

from __future__ import annotations

import argparse
import json

from .common import Commands, add_command, add_source_options, network, print_table


def register(commands: Commands) -> argparse.ArgumentParser:
    ve = add_command(
        commands, "versions", help="list a kernel's versions (release tags and major branches)",
        description="List the versions of a kernel: its release tags (vX.Y.Z, what "
                    "`to-wheel REPO X.Y.Z` converts) and major branches (vN, what "
                    "`get_kernel(REPO, version=N)` loads), each with its commit and how many "
                    "build variants it has (like `kernels versions`).",
        epilog="examples:\n  kernel-wheels versions drbh/img2gray\n"
               "  kernel-wheels versions ./img2gray-repo --json\n")
    ve.add_argument("source", help="Hub repo id (org/name), or git repository path or URL")
    ve.add_argument("--json", action="store_true", help="print JSON on stdout")
    add_source_options(ve)
    return ve


def run(args: argparse.Namespace) -> int:
    from ..sources import open_source
    from ..sources.releases import list_versions

    source = open_source(args.source, repo_type=args.repo_type, network=network(args),
                         progress=args.progress)
    versions = list_versions(source)
    if args.json:
        print(json.dumps({"source": source.display, "versions": [v.to_dict() for v in versions]},
                         indent=2))
        return 0
    if not versions:
        args.progress(f"{source.display} has no versions (no vX.Y.Z tags or vN branches)")
        return 0
    kinds = {"release": "release", "major": "major (newest build)"}
    rows = [(v.version, kinds[v.kind] + (" (ambiguous)" if v.rivals else ""), v.ref,
             v.commit[:12], f"{v.variants} variant{'s' if v.variants != 1 else ''}")
            for v in versions]
    print_table(("version", "kind", "ref", "commit", "builds"), rows)
    for version in versions:
        if version.ambiguity:
            args.progress(f"warning: {version.ambiguity}: to-wheel, serve and mirror refuse it "
                          "(remove one tag, or convert one commit with --revision COMMIT)")
    return 0
