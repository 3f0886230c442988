"""``kernel-wheels yank``: yank a release from a static site (PEP 592), or undo it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import Commands, add_command, writable_folder

EPILOG = """\
examples:
  kernel-wheels yank site img2gray 1.1.2 --reason "wrong results on sm_80"
  kernel-wheels yank site img2gray 1.1.2 --undo        # list it as usual again

A yanked release stays in the site: installers skip it unless it is pinned exactly
(img2gray==1.1.2), so machines that pinned it keep working. Every page that lists its
files shows the yank (the root index and each target index). kernel-wheels install
honours it the same way. Index servers: see `kernel-wheels publish --help`.
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    yk = add_command(
        commands, "yank", help="yank a release from a static site (PEP 592), or --undo it",
        description="Mark every file of a release in a static site as yanked (PEP 592), "
                    "with an optional reason, and render its pages again.", epilog=EPILOG)
    yk.add_argument("site", type=Path, metavar="SITE", help="the site folder `kernel-wheels index` made")
    yk.add_argument("name", metavar="NAME", help="the project (distribution) name")
    yk.add_argument("version", metavar="VERSION", help="the release, e.g. 1.1.2 (all its builds)")
    yk.add_argument("--reason", default="", help="shown to users by installers (one line)")
    yk.add_argument("--undo", action="store_true", help="un-yank the release")
    yk.add_argument("--json", action="store_true", help="print a JSON result on stdout")
    return yk


def run(args: argparse.Namespace) -> int:
    writable_folder(args.site, "SITE")  # before any work (a build takes minutes)
    from ..site.build import yank_release

    change, result = yank_release(args.site, args.name, args.version, reason=args.reason,
                                  undo=args.undo, progress=args.progress)
    state = "yanked" if change.yanked else "not yanked"
    if not change.changed:
        args.progress(f"{change.project} {change.version} already was {state}")
    else:
        args.progress(f"{change.project} {change.version} is now {state}"
                      + (f" ({change.reason})" if change.yanked and change.reason else ""))
    if args.json:
        print(json.dumps({"project": change.project, "version": change.version,
                          "yanked": change.yanked, "reason": change.reason,
                          "changed": change.changed, "site": result.to_dict()}, indent=2))
    return 0
