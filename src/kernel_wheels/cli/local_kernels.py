"""``kernel-wheels local-kernels``."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from .common import Commands, add_command

EPILOG = """\
examples:
  kernel-wheels local-kernels --python .venv/bin/python
  eval "$(kernel-wheels local-kernels --python .venv/bin/python --shell)"   # then run your code
  LOCAL_KERNELS=$(kernel-wheels local-kernels) HF_HUB_OFFLINE=1 python train.py

With the mapping set, kernels.get_kernel("org/name", ...) (and transformers, which calls
it) loads the installed build instead of downloading from the Hub; kernels verifies the
installed folder against its metadata.json digest as it would a download.
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
    out = lk.add_mutually_exclusive_group()
    out.add_argument("--shell", action="store_true", help="print an export line for sh/bash/zsh")
    out.add_argument("--json", action="store_true", help="print every installed kernel as JSON")
    return lk


def run(args: argparse.Namespace) -> int:
    from ..install.installed import installed_kernels, local_kernels_value, unmet_pins

    kernels = installed_kernels(args.python)
    if args.json:
        print(json.dumps([kernel.to_dict() for kernel in kernels], indent=2))
        return 0
    value = local_kernels_value(kernels, args.progress)
    for line in unmet_pins(kernels):
        args.progress(f"warning: {line}")
    if not value:
        args.progress("no kernel wheel from the Hub is installed there")
    print(f"export LOCAL_KERNELS={shlex.quote(value)}" if args.shell else value)
    return 0
