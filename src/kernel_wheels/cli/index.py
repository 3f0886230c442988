"""``kernel-wheels index``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import Commands, add_command, add_policy, policy, positive_int, writable_folder

EPILOG = """\
examples:
  kernel-wheels index wheels/ -o site                  # a site from a folder of wheels
  kernel-wheels index new/*.whl -o site                # add wheels; only changed pages are rewritten
  kernel-wheels index wheels/ -o site --target torch27-cxx11-cu129
  kernel-wheels index -o site                          # re-sync pages with site/files/
  python -m http.server -d site -b 127.0.0.1 8000      # serve it (any static server will do)
  pip install img2gray --index-url http://127.0.0.1:8000/torch213-cxx11-cpu/simple

Layout: site/simple/ lists every wheel (PEP 503 HTML index.html, PEP 691 JSON
index.json, PEP 658 .metadata files); site/<target>/simple/ lists, per release and
platform, the one build a machine of that target should get, so that plain pip picks
the right binary and never touches the installed torch. A target key is a variant name
without its arch and OS: torch27-cxx11-cu128, torch213-cxx11-cpu, torch213-metal.
Every wheel is checked first (its provenance re-verified under the policy options);
one that fails is refused and nothing changes. The JSON pages carry each file's
provenance summary as "_provenance" (docs/provenance.md).
See docs/index-scheme.md.
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    ix = add_command(
        commands, "index", help="build or update a static package index (a folder any web server serves)",
        description="Add wheels to a static Simple-API index: SITE/simple/ with every wheel, "
                    "and one SITE/<target>/simple/ per build target listing only what fits "
                    "that target. Incremental, atomic, safe to run twice at once.", epilog=EPILOG)
    ix.add_argument("inputs", nargs="*", type=Path, metavar="WHEELS_OR_DIRS",
                    help="wheel files, or folders holding them (not searched recursively)")
    ix.add_argument("-o", "--output", type=Path, required=True, metavar="SITE",
                    help="the site folder (created if missing)")
    ix.add_argument("--target", action="append", default=[], metavar="KEY",
                    help="also index this target, e.g. torch27-cxx11-cu129 (repeatable); "
                         "targets of the wheels' own builds are always indexed")
    ix.add_argument("-j", "--jobs", type=positive_int, default=0,
                    help="processes checking new wheels (default: one per CPU)")
    ix.add_argument("--json", action="store_true", help="print a JSON result on stdout")
    add_policy(ix, publisher=True)
    return ix


def run(args: argparse.Namespace) -> int:
    writable_folder(args.output, "-o")  # before any work (a build takes minutes)
    from ..site.build import build_site

    result = build_site(args.output, args.inputs, args.target, jobs=args.jobs, progress=args.progress,
                        policy=policy(args))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        for index in result.to_dict()["indexes"]:
            print(args.output / index)
    return 0
