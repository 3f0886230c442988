"""``kernel-wheels local-kernels``."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from .common import Commands, add_command, out

EPILOG = """\
examples:
  kernel-wheels local-kernels --python .venv/bin/python
  eval "$(kernel-wheels local-kernels --python .venv/bin/python --shell)"   # then run your code
  LOCAL_KERNELS=$(kernel-wheels local-kernels) HF_HUB_OFFLINE=1 python train.py
  kernel-wheels local-kernels --allow-hand-ids   # also ids typed with to-wheel --repo-id

With the mapping set, kernels.get_kernel("org/name", ...) (and transformers, which calls
it) loads the installed build instead of downloading from the Hub; kernels verifies the
installed folder against its metadata.json digest as it would a download. Each mapped
id's origin is shown on stderr: the Hub, the build's metadata.json, or typed by hand; an
id typed by hand is mapped only with --allow-hand-ids (or KERNEL_WHEELS_ALLOW_HAND_IDS=1).
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    lk = add_command(
        commands, "local-kernels", help="print LOCAL_KERNELS for the kernel wheels installed in a Python",
        description="Print the LOCAL_KERNELS value (org/name=/path:...) that makes the kernels "
                    "library's get_kernel load the kernel wheels installed in a Python, from "
                    "what each wheel records in its dist-info.", epilog=EPILOG)
    lk.add_argument("--python", type=Path,
                    help="the Python whose wheels to map (default: the activated venv's, else "
                         "the one running kernel-wheels)")
    lk.add_argument("--allow-hand-ids", action=argparse.BooleanOptionalAction, default=None,
                    help="also map repository ids typed by hand (to-wheel --repo-id) or of no "
                         "recorded origin: get_kernel of such an id loads whatever folder it "
                         "names (default: KERNEL_WHEELS_ALLOW_HAND_IDS=1, else off)")
    out = lk.add_mutually_exclusive_group()
    out.add_argument("--shell", action="store_true", help="print an export line for sh/bash/zsh")
    out.add_argument("--json", action="store_true", help="print every installed kernel as JSON")
    return lk


def run(args: argparse.Namespace) -> int:
    from ..install.installed import hand_ids_allowed, installed_kernels, local_kernels_value, unmet_pins

    allowed = hand_ids_allowed(args.allow_hand_ids)
    kernels = installed_kernels(args.python)
    if args.json:
        out(json.dumps([kernel.to_dict(allowed) for kernel in kernels], indent=2))
        return 0
    value = local_kernels_value(kernels, args.progress, allowed)
    for line in unmet_pins(kernels, allowed):
        args.progress(f"warning: {line}")
    if not value:
        args.progress("no kernel wheel from the Hub is mapped there")
        if args.shell:
            # kernels refuses an empty LOCAL_KERNELS on every get_kernel, Hub loads too.
            out("unset LOCAL_KERNELS")
            return 0
    out(f"export LOCAL_KERNELS={shlex.quote(value)}" if args.shell else value)
    return 0
