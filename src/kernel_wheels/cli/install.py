"""``kernel-wheels install``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from .common import Commands, add_command, add_policy, out, policy, stderr

if TYPE_CHECKING:
    from ..install.core import InstallOptions, InstallResult

EPILOG = """\
examples:
  kernel-wheels install img2gray --index-url http://pypi.internal:8080/simple/
  PIP_INDEX_URL=http://pypi.internal:8080/simple/ kernel-wheels install img2gray   # or pip.conf
  kernel-wheels install img2gray -i http://HOST/simple --extra-index-url http://OTHER/simple
  kernel-wheels install img2gray --no-index -f ./wheels                   # a folder of wheels
  kernel-wheels install 'img2gray>=1.1,<2' --index-url https://devpi.internal/team/prod/+simple/
  kernel-wheels install img2gray==1.1.2 --index-url http://127.0.0.1:8000/simple --dry-run
  kernel-wheels install img2gray --index-url http://HOST/simple --python .venv/bin/python --installer uv

It reads the target Python's environment (Python, OS, CPU, torch, CUDA/ROCm/XPU version,
C++ ABI) by running a small probe in it, lists the project's files on the index, picks
what the Hub's kernel loader would pick (same torch major.minor; CUDA of the same major
and not newer, nearest first; stable-ABI builds for torch at or above their version;
then the backend's Python-only build; torch-universal last), says why, downloads that
exact file (its sha256 checked against the index's) and installs it with torch pinned
to the installed version, as NAME==VERSION from a folder holding only that file (so
pip freeze shows NAME==VERSION, an index install). Indexes as pip and uv take them:
-i/--extra-index-url/-f/--no-index, else PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
PIP_FIND_LINKS, UV_INDEX_URL (UV_DEFAULT_INDEX), UV_EXTRA_INDEX_URL (UV_INDEX), else
pip.conf, else PyPI. Credentials: the URL's user part, else ~/.netrc, else the keyring;
they go only to the index's own origin, and reach pip/uv through their environment,
never their argv. Pre-releases (and snapshots of unreleased commits) only with --pre, a
pin (==), or when nothing else fits.
When nothing fits it lists every file with the reason it was rejected and exits 1. The
target Python defaults to the activated virtual environment's, else the one running
kernel-wheels.
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    ins = add_command(
        commands, "install",
        help="install the one wheel of a kernel that fits this torch, never changing torch",
        description="Choose the kernel wheel that fits a Python environment, as the Hub's "
                    "loader would, and install it with pip or uv with torch pinned.", epilog=EPILOG)
    _add_what(ins)
    _add_where(ins)
    ins.add_argument("--python", type=Path, help="the Python to install into")
    ins.add_argument("--installer", choices=["pip", "uv"], default="pip",
                     help="what installs the chosen file into the target Python (default: pip)")
    ins.add_argument("--gpu-arch", metavar="ARCH",
                     help="the GPU to install for: a compute capability (9.0, or nvcc's sm_90, "
                          "compute_90) or an AMD target ID "
                          "(gfx942, gfx942:sramecc+:xnack-) (default: torch's current GPU in the "
                          "target Python; no GPU: not checked)")
    ins.add_argument("--dry-run", action="store_true",
                     help="choose and explain, install nothing; prints the installer's command, "
                          "with \"$KW_INSTALL_TMP\" for a folder you make holding "
                          "constraints.txt and links-N/ with the chosen file")
    ins.add_argument("--json", action="store_true", help="print the decision as JSON on stdout")
    add_policy(ins)
    ins.add_argument("--timeout", type=float, metavar="SECONDS",
                     help="connect timeout, and the window in which each transfer must move "
                          "64 KiB/s (default: $KERNEL_WHEELS_TIMEOUT or 60)")
    return ins


def _add_what(ins: argparse.ArgumentParser) -> None:
    """The kernels to install, and which of their builds."""
    ins.add_argument("requirements", nargs="*", metavar="NAME[SPEC]",
                     help="img2gray, img2gray==1.1.2 or 'img2gray>=1.1,<2' (several: each "
                          "chosen, then all installed)")
    ins.add_argument("-r", "--requirement", action="append", default=[], type=Path,
                     metavar="FILE", dest="requirement_files",
                     help="install the kernels a requirements file names, one per line "
                          "(repeatable; pip's format: comments, -r of another file)")
    ins.add_argument("-U", "--upgrade", action="store_true",
                     help="pip's habit, accepted: install always takes the newest release "
                          "with a fitting build, replacing an older one")
    ins.add_argument("--no-deps", action="store_true",
                     help="install the kernels only, not the Python packages they require")
    ins.add_argument("--backend", choices=["cpu", "cuda", "rocm", "xpu", "metal"],
                     help="choose builds for this backend instead of torch's own: cpu runs a "
                          "CPU build on a CUDA/ROCm/XPU torch (the kernels library's backend=)")


def _add_where(ins: argparse.ArgumentParser) -> None:
    where = ins.add_argument_group("where to look (pip's and uv's options; default: "
                                   "their variables, then pip.conf, then PyPI)")
    where.add_argument("-i", "--index-url", metavar="URL",
                       help="the index's Simple API: its root /simple/ or a target index "
                            "(default: PIP_INDEX_URL, UV_INDEX_URL, pip.conf's index-url)")
    where.add_argument("--extra-index-url", action="append", default=[], metavar="URL",
                       help="another index to read (repeatable; default: PIP_EXTRA_INDEX_URL, "
                            "UV_EXTRA_INDEX_URL, pip.conf)")
    where.add_argument("-f", "--find-links", action="append", default=[], metavar="PATH_OR_URL",
                       help="a folder of wheels or an HTML page of links (repeatable)")
    where.add_argument("--no-index", action="store_true",
                       help="read no index, only --find-links")
    where.add_argument("--pre", action="store_true",
                       help="include pre-releases and snapshots (.devN) of unreleased commits")
    where.add_argument("--cert", metavar="PATH", help="CA bundle to verify the index with")
    where.add_argument("--client-cert", metavar="PATH",
                       help="client certificate: one PEM file with the key and certificate")
    where.add_argument("--keyring-provider", choices=["auto", "import", "subprocess", "disabled"],
                       help="where index credentials may come from when the URL and ~/.netrc "
                            "have none (default: auto, the keyring package if installed)")


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..install.core import install_many
    from ..install.report import install_document, unfit
    from ..install.requirements import read_requirements
    from ..kernel.gpu_target import parse_gpu_arch
    from ..remote.index_settings import IndexFlags, environment_prefix, resolve

    if args.gpu_arch is not None:
        parse_gpu_arch(args.gpu_arch)  # first: a bad --gpu-arch is said before anything is read
    flags = IndexFlags(args.index_url, tuple(args.extra_index_url), tuple(args.find_links),
                       args.no_index, args.pre, args.cert, args.client_cert, args.keyring_provider)
    requirements = list(args.requirements)
    for path in args.requirement_files:
        requirements += read_requirements(path)
    if not requirements:
        raise UsageError("give the kernels to install: NAME[SPEC]..., or -r FILE")
    settings = resolve(flags, prefix=environment_prefix(args.python))
    results = install_many(requirements, settings, _options(args), progress=args.progress)
    refused = unfit(results, backend=args.backend, several=len(requirements) > 1)
    if refused is not None:
        for line in refused.rejections:  # the error's reasons: shown even with -q
            stderr(f"  {line}")
        raise refused.error
    if args.json:
        out(json.dumps(install_document(results), indent=2))
    for index, result in enumerate(results):
        _tell(result, index, args)
    return 0


def _options(args: argparse.Namespace) -> InstallOptions:
    from ..install.core import InstallOptions
    from ..remote.transport import index_timeout

    return InstallOptions(python=args.python, installer=args.installer, dry_run=args.dry_run,
                          timeout=index_timeout(args.timeout), backend=args.backend,
                          no_deps=args.no_deps, policy=policy(args), gpu_arch=args.gpu_arch)


def _tell(result: InstallResult, index: int, args: argparse.Namespace) -> None:
    """What was chosen and why (stdout, unless --json or -q), and what was done."""
    from ..install.core import DRY_RUN_FOLDER
    from ..install.report import shell_line

    choice = result.choice
    assert choice.chosen is not None
    if not args.json and not args.quiet:
        out(f"chose {choice.chosen.file.filename}")
        for line in choice.why:
            out(f"  why: {line}")
        for decision in choice.decisions[1:]:
            if decision.rejected is not None:
                out(f"  rejected {decision.file.filename}: {decision.rejected}")
    if result.installed:
        args.progress(f"installed {choice.chosen.file.filename}; torch "
                      f"{choice.environment.torch_version} unchanged (none of its {result.torch_files} "
                      "recorded files in what the installer recorded writing)")
    else:
        args.progress("dry run: would run " + shell_line(result))
        args.progress(f"  with {DRY_RUN_FOLDER[1:]} a folder holding constraints.txt (torch=="
                      f"{choice.environment.torch_version}) and links-{index}/ with "
                      f"{choice.chosen.file.filename}")
