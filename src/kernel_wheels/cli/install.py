"""``kernel-wheels install``."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from .common import add_policy, policy, stderr

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


def register(commands: Any) -> argparse.ArgumentParser:
    ins: argparse.ArgumentParser = commands.add_parser(
        "install", help="install the one wheel of a kernel that fits this torch, never changing torch",
        description="Choose the kernel wheel that fits a Python environment, as the Hub's "
                    "loader would, and install it with pip or uv with torch pinned.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
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
    ins.add_argument("--python", type=Path, help="the Python to install into")
    ins.add_argument("--installer", choices=["pip", "uv"], default="pip",
                     help="what installs the chosen file into the target Python (default: pip)")
    ins.add_argument("--gpu-arch", metavar="ARCH",
                     help="the GPU to install for: a compute capability (9.0) or an AMD target ID "
                          "(gfx942, gfx942:sramecc+:xnack-) (default: torch's current GPU in the "
                          "target Python; no GPU: not checked)")
    ins.add_argument("--dry-run", action="store_true", help="choose and explain, install nothing")
    ins.add_argument("--json", action="store_true", help="print the decision as JSON on stdout")
    add_policy(ins)
    ins.add_argument("--timeout", type=float, metavar="SECONDS",
                     help="connect timeout, and the window in which each transfer must move "
                          "64 KiB/s (default: $KERNEL_WHEELS_TIMEOUT or 60)")
    return ins


def _prefix(python: Path | None) -> str | None:
    """The target environment's prefix, for its pip.conf (pip's "site" configuration)."""
    if python is None:
        return os.environ.get("VIRTUAL_ENV")
    folder = python.absolute().parent.parent
    return str(folder) if (folder / "pyvenv.cfg").is_file() else None


def run(args: argparse.Namespace) -> int:
    from ..errors import NoMatchingWheelError, UsageError
    from ..install.core import install_many
    from ..install.requirements import read_requirements
    from ..remote.index_settings import IndexFlags, resolve
    from ..remote.transport import index_timeout

    flags = IndexFlags(args.index_url, tuple(args.extra_index_url), tuple(args.find_links),
                       args.no_index, args.pre, args.cert, args.client_cert, args.keyring_provider)
    requirements = list(args.requirements)
    for path in args.requirement_files:
        requirements += read_requirements(path)
    if not requirements:
        raise UsageError("give the kernels to install: NAME[SPEC]..., or -r FILE")
    settings = resolve(flags, prefix=_prefix(args.python))
    results = install_many(requirements, settings, python=args.python,
                           installer=args.installer, dry_run=args.dry_run, progress=args.progress,
                           timeout=index_timeout(args.timeout), backend=args.backend,
                           no_deps=args.no_deps, policy=policy(args),
                           gpu_arch=args.gpu_arch)
    documents = [{**result.choice.to_dict(), "command": list(result.command),
                  "index_env": list(result.index_env), "installed": result.installed}
                 for result in results]
    # One kernel: its decision is the document, as before; several: a list of them.
    document: Any = documents[0] if len(documents) == 1 else {"kernels": documents}
    unfit = [result.choice for result in results if result.choice.chosen is None]
    if unfit:
        choice = unfit[0]
        if choice.gpu is not None and (line := choice.gpu.no_fit()):
            error = NoMatchingWheelError(f"no wheel of {choice.project} fits: {line}")
            error.json_details = document
            raise error
        for decision in choice.decisions:  # the error's reasons: shown even with -q
            stderr(f"  rejected {decision.file.filename}: {decision.rejected}")
        error = NoMatchingWheelError(
            f"no wheel of {choice.project} fits {choice.environment.describe()}: "
            f"{len(choice.decisions)} file(s) on the index, each rejected above"
            + _backend_hint(choice, args.backend) + ("; nothing was installed"
                                                      if len(requirements) > 1 else ""))
        error.json_details = document  # one JSON document: the decision and the error
        raise error
    if args.json:
        print(json.dumps(document, indent=2))
    for result in results:
        choice = result.choice
        assert choice.chosen is not None
        if not args.json:
            print(f"chose {choice.chosen.file.filename}")
            for line in choice.why:
                print(f"  why: {line}")
            for decision in choice.decisions[1:]:
                if decision.rejected is not None:
                    print(f"  rejected {decision.file.filename}: {decision.rejected}")
        if result.installed:
            args.progress(f"installed {choice.chosen.file.filename}; torch "
                          f"{choice.environment.torch_version} unchanged (its {result.torch_files} recorded "
                          "files compared before and after)")
        else:
            args.progress("dry run: would run " + " ".join((*result.index_env, *result.command)))
    return 0


def _backend_hint(choice: Any, backend: str | None) -> str:
    """A CPU build is there but torch is built for a GPU: say how to take it."""
    target = choice.environment.target
    if backend is not None or target is None or target.backend == "cpu":
        return ""
    cpu_builds = [d for d in choice.decisions
                  if d.wheel is not None and d.wheel.variant is not None
                  and d.wheel.variant.backend == "cpu"]
    if not cpu_builds:
        return ""
    return (f" (a CPU build is there: --backend cpu runs it on this {target.backend_tag} "
            "torch)")
