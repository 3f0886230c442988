"""``kernel-wheels to-wheel``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .common import Commands, add_command, add_source_options, filters, network, policy, positive_int

if TYPE_CHECKING:
    from ..convert.pipeline import ConvertOptions, WheelResult
    from ..kernel.versions import VersionRequest
    from ..network import NetworkSettings

EPILOG = """\
examples:
  kernel-wheels to-wheel drbh/img2gray 1.1.2                 # every variant of tag v1.1.2
  kernel-wheels to-wheel drbh/img2gray '>=1.1,<2' -o wheels  # newest matching tag
  kernel-wheels to-wheel drbh/img2gray 1                     # newest build on branch v1
  kernel-wheels to-wheel drbh/img2gray --revision 3f2a1b0    # any branch, tag or commit
  kernel-wheels to-wheel ./img2gray-repo 1.1.2 --variant 'torch213-*-cpu-*'
  kernel-wheels to-wheel ./build-output 1.1.2 --dist-name acme-img2gray --json
  kernel-wheels to-wheel drbh/img2gray 1.1.2 --compression 1  # faster, larger wheels
  kernel-wheels to-wheel drbh/img2gray 1.1.2 --variants      # plus variant wheels (draft PEP 825)
  kernel-wheels to-wheel --lock my-project -o wheels          # what kernels.lock pins, verified
  kernel-wheels to-wheel --lock kernels.lock --backend cpu -o wheels
  kernel-wheels to-wheel drbh/img2gray 1.1.2 --require-signature --require-trusted-publisher

A run writes all its wheels or none. Wheels are checked before they are written
(--no-check skips that). The same commit and options give byte-identical wheels on
every machine (see docs/wheel-contract.md for exactly what the bytes depend on).

Each variant's Sigstore bundle (metadata.json.sigstore) is verified before it is
converted, offline, with the kernels library's signer policy; one that does not verify
is refused. What was verified is recorded in the wheel (docs/provenance.md).

Moving from `kernels to-wheel REPO VERSION`: replace `kernels` with `kernel-wheels`;
--python-version and --manylinux-version work as before.
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    tw = add_command(
        commands, "to-wheel", help="convert a kernel's build variants into wheels",
        description="Convert the build variants of a Hub kernel (a Hub repo id, a git "
                    "repository or URL, or a local folder holding build/) into one wheel "
                    "per variant.", epilog=EPILOG)
    _add_what(tw)
    _add_wheel_options(tw)
    tw.add_argument("-j", "--jobs", type=positive_int, default=0,
                    help="wheels produced at once, in worker processes (default: one per CPU)")
    tw.add_argument("--json", action="store_true",
                    help="print a JSON result on stdout (a JSON error object on failure)")
    add_source_options(tw, filters=True, policy=True)
    return tw


def _add_what(tw: argparse.ArgumentParser) -> None:
    """What to convert: a source at a version, or what a lock pins."""
    tw.add_argument("source", nargs="?",
                    help="Hub repo id (org/name), git repository path or URL, "
                         "or a folder holding build/ or variant folders")
    tw.add_argument("version", nargs="?",
                    help="1.1.2 (tag v1.1.2), a range '>=1.1,<2', or a major version 1 "
                         "(branch v1); for a plain folder, the version to give the wheels")
    tw.add_argument("--revision", help="branch, tag or commit to convert (VERSION, if also "
                                       "given, becomes the wheel version)")
    tw.add_argument("--lock", type=Path, metavar="PATH",
                    help="convert every kernel a kernels.lock pins, at its locked commit, each "
                         "variant checked against the lock first (PATH: the lock file, or a "
                         "project folder holding pyproject.toml and kernels.lock); instead of "
                         "SOURCE and VERSION")
    tw.add_argument("--pylock", metavar="FILES_URL",
                    help="with --lock: also write pylock.<target>.toml (PEP 751) per build "
                         "target, each wheel at FILES_URL/<wheel> with its sha256, for "
                         "`uv pip install -r` (FILES_URL: a kernel-wheels site's "
                         "https://HOST/files/, pypiserver's https://HOST/packages/)")


def _add_wheel_options(tw: argparse.ArgumentParser) -> None:
    """Where the wheels go and what they are made as."""
    tw.add_argument("-o", "--output-dir", type=Path, default=Path("."),
                    help="where to write the wheels (default: current folder)")
    tw.add_argument("--python-version", default="3.9",
                    help="minimum Python of the abi3 tag (default: 3.9)")
    tw.add_argument("--manylinux-version", default="2.28",
                    help="glibc version of the manylinux tag, or 'auto' for the lowest the "
                         "binaries meet (default: 2.28)")
    tw.add_argument("--macos-version", default="auto",
                    help="macOS version of the macosx tag: 'auto' gives each build the version "
                         "its binaries need, never below what its backend needs (Metal: 26.0); "
                         "a version such as 15.0 tags every build with it (default: auto)")
    tw.add_argument("--dist-name", help="distribution name to publish under (the import "
                                        "name never changes)")
    tw.add_argument("--force", action="store_true",
                    help="replace existing wheels of the same name with different content")
    tw.add_argument("--no-check", action="store_true",
                    help="write wheels without checking them (not recommended)")
    tw.add_argument("--compression", type=int, metavar="LEVEL",
                    help="deflate level: 1 (fastest) to 9 (smallest), 0 stores (default: 6)")
    tw.add_argument("--variants", action="store_true",
                    help="also write each build's variant wheel (PEP 825 draft: "
                         "NAME-V-TAGS-LABEL.whl with .dist-info/variant.json; docs/variants.md)")
    tw.add_argument("--repo-id", metavar="ORG/NAME",
                    help="the Hub repository a folder or git source is published as (default: "
                         "its metadata.json's repo-id, which build writes from build.toml): "
                         "local-kernels maps the installed wheel to it for get_kernel")


def run(args: argparse.Namespace) -> int:
    from ..convert.pipeline import to_wheels
    from ..kernel.versions import parse_request
    from ..progress import counted
    from ..sources import open_source

    files_url = _pylock_url(args)
    # Every option is validated before any work; to_wheels checks the output folder before
    # any network work (opening a source makes no request).
    request = parse_request(args.version, args.revision) if args.lock is None else None
    options = _options(args, request)
    settings = network(args)
    if args.no_check:
        args.progress("warning: --no-check: wheels are written WITHOUT checking that they are "
                      "what their names claim")
    if request is None:
        return _run_locked(args, options, settings, files_url)
    source = open_source(args.source, repo_type=args.repo_type, network=settings, progress=args.progress)
    result = to_wheels(source, request, options, progress=args.progress)
    args.progress(f"done: {counted(len(result.wheels), 'wheel')} of {result.source} {result.version} "
                  f"in {args.output_dir} ({_statuses(result.wheels)})")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    return 0


def _pylock_url(args: argparse.Namespace) -> str | None:
    """SOURCE or --lock, and --pylock's FILES_URL (checked) with --lock only."""
    from ..errors import UsageError

    if args.lock is not None and (args.source or args.version or args.revision or args.repo_id):
        raise UsageError("--lock converts what the lock pins: give no SOURCE, VERSION, --revision "
                         "or --repo-id")
    if args.pylock is not None and args.lock is None:
        raise UsageError("--pylock goes with --lock: it pins what a kernels.lock converts")
    files_url = None
    if args.pylock is not None:
        from ..locked.pylock import check_files_url

        files_url = check_files_url(args.pylock)
    if args.lock is None and not args.source:
        raise UsageError("give SOURCE (a Hub repo id, git repository or folder), or --lock PATH")
    return files_url


def _options(args: argparse.Namespace, request: VersionRequest | None) -> ConvertOptions:
    from ..convert.pipeline import ConvertOptions
    from ..kernel.versions import RequestKind
    from ..wheel.compression import DEFAULT_LEVEL
    from ..wheel.plan import TagOptions

    given = args.version if request is not None and request.kind is RequestKind.REVISION else None
    auto = args.manylinux_version == "auto"
    return ConvertOptions(
        output_dir=args.output_dir,
        tags=TagOptions(args.python_version, "2.28" if auto else args.manylinux_version,
                        args.macos_version),
        filters=filters(args),
        dist_name=args.dist_name,
        version=given,
        force=args.force,
        check=not args.no_check,
        jobs=args.jobs,
        manylinux_auto=auto,
        compression=DEFAULT_LEVEL if args.compression is None else args.compression,
        variants=args.variants,
        policy=policy(args),
        repo_id=args.repo_id,
    )


def _run_locked(args: argparse.Namespace, options: ConvertOptions, settings: NetworkSettings,
                files_url: str | None) -> int:
    from ..locked.lockfile import read_lock
    from ..locked.pipeline import convert_locked
    from ..progress import counted

    lock = read_lock(args.lock)
    args.progress(lock.describe())
    done = convert_locked(lock, options, network=settings, repo_type=args.repo_type, progress=args.progress)
    args.progress(f"done: {counted(len(done.wheels), 'wheel')} of "
                  f"{counted(len(done.results), 'locked kernel')} in "
                  f"{args.output_dir} ({_statuses(done.wheels)})")
    document = done.to_dict()
    if files_url is not None:
        from ..locked.pylock import write_conversion_pylocks

        written = write_conversion_pylocks(done, args.output_dir, files_url)
        for path in written:
            args.progress(f"wrote {path} (uv pip install -r {path.name})")
        document["pylock"] = [str(path) for path in written]
    if args.json:
        print(json.dumps(document, indent=2))
    return 0


def _statuses(wheels: Sequence[WheelResult]) -> str:
    counts: dict[str, int] = {}
    for wheel in wheels:
        counts[wheel.status] = counts.get(wheel.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
