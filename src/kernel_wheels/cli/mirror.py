"""``kernel-wheels mirror``."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..progress import Task, readable_size
from .common import (
    Commands,
    add_command,
    add_filters,
    add_source_options,
    filters,
    network,
    out,
    policy,
    positive_int,
)
from .progress import TerminalProgress, from_args

if TYPE_CHECKING:
    from ..mirror.pipeline import MirrorOptions, MirrorResult
    from ..mirror.progress import Event

EPILOG = """\
examples:
  kernel-wheels mirror kernels-community/activation kernels-community/flash-attn --to site/
  kernel-wheels mirror --org kernels-community --to s3://my-bucket/kernels
  kernel-wheels mirror --lock my-project/ --to s3://my-bucket/kernels --backend cuda
  kernel-wheels mirror ORG/NAME --to site/ --versions '>=1.2,<3' --newest 2 --dry-run
  kernel-wheels mirror ORG/NAME --to s3://b/k --shard 3/8     # the 4th of 8 workers
  kernel-wheels mirror ORG/NAME --to s3://b/k --shard auto    # in a Slurm array task, an Indexed Job
  AWS_ENDPOINT_URL=http://127.0.0.1:9000 kernel-wheels mirror ORG/NAME --to s3://b/k
  TWINE_USERNAME=ci TWINE_PASSWORD=... \\
    kernel-wheels mirror ORG/NAME --to https://pypi.internal/ --state s3://b/mirror-state

A re-run converts only what is new. A release deleted on the Hub is yanked (PEP 592),
or removed with --prune; a tag that moved to another commit is reported and left alone
unless --replace-moved. Under a policy (--require-signature, --policy FILE, ...), what the
destination already publishes is judged too: each wheel the policy refuses is reported
refused, or removed with its pages under --remove-refused. Wheel objects are written
before the records and pages that name them: a run stopped anywhere is finished by the
next one, with the same bytes.
N workers with --shard 0/N .. N-1/N write exactly what one run writes; --shard auto takes
K/N from KERNEL_WHEELS_SHARD=K/N, a Slurm array task (SLURM_ARRAY_TASK_ID - _MIN of _COUNT)
or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX of KERNEL_WHEELS_SHARD_COUNT). The destination
is a static index (docs/index-scheme.md); serve a folder with any web server, a bucket
through its website endpoint or a CDN. An index server URL as --to gets the wheels through
its upload API (credentials as `publish` reads them: TWINE_USERNAME/TWINE_PASSWORD,
the URL's user part, the keyring, a prompt on a terminal); the state and lease live in --state
(a folder or bucket), and deleted releases are reported as not yanked (the upload API
cannot yank). See docs/mirror.md.
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    mp = add_command(
        commands, "mirror", help="keep an index (folder, S3 bucket or index server) in sync with Hub kernels",
        description="Convert every release of the given kernels (repositories, an organisation, "
                    "or a kernels.lock) into a static index in a folder or an S3-compatible "
                    "bucket, or onto an index server; incremental, crash-safe, and split over "
                    "workers with --shard.", epilog=EPILOG)
    mp.add_argument("repos", nargs="*", metavar="REPO", help="Hub kernel repositories (org/name)")
    mp.add_argument("--org", action="append", default=[], metavar="ORG",
                    help="every repository of this organisation (repeatable)")
    mp.add_argument("--lock", type=Path, metavar="FILE",
                    help="a kernels.lock (or the project folder holding it): each locked release")
    mp.add_argument("--to", required=True, metavar="DEST",
                    help="a folder, s3://BUCKET/PREFIX (AWS_* environment, AWS_ENDPOINT_URL), or an "
                         "index server's upload URL (as publish; with --state)")
    mp.add_argument("--state", metavar="DEST",
                    help="with an index server --to: the folder or s3://BUCKET/PREFIX holding the "
                         "mirror's state and lease")
    versions = mp.add_argument_group("version selection (default: every release)")
    versions.add_argument("--versions", metavar="RANGE", help="only releases in this range, e.g. '>=1.2,<3'")
    versions.add_argument("--newest", type=int, metavar="N", help="only the newest N releases of each major")
    add_filters(mp)
    mp.add_argument("--shard", default="0/1", metavar="K/N|auto",
                    help="do the K-th of N disjoint parts (K from 0); auto: the part the batch engine "
                         "gives (a Slurm array task, a Kubernetes Indexed Job, KERNEL_WHEELS_SHARD=K/N)")
    mp.add_argument("--prune", action="store_true",
                    help="remove releases deleted on the Hub (default: yank them)")
    mp.add_argument("--replace-moved", action="store_true",
                    help="convert again a release whose tag moved to another commit")
    mp.add_argument("--remove-refused", action="store_true",
                    help="remove the published wheels the policy refuses, with their pages "
                         "(default: report them, refused)")
    mp.add_argument("--dry-run", action="store_true", help="list the plan; download no binaries")
    mp.add_argument("-j", "--jobs", type=positive_int, default=0,
                    help="wheels produced at once per release, and processes writing pages "
                         "(default: one per CPU)")
    mp.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    add_source_options(mp, policy=True)
    return mp


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..mirror.listing import HubLister, gather
    from ..mirror.pipeline import check_target, mirror, open_target

    if not (args.repos or args.org or args.lock):
        raise UsageError("name what to mirror: REPO ..., --org ORG or --lock FILE")
    options = _options(args)
    check_target(args.to, args.state, options)  # before --timeout and --retries are read
    store, uploads = open_target(args.to, args.state, options, network(args), prompt=not args.dry_run)
    progress = from_args(args)
    lister = HubLister(network(args), args.repo_type, warn=progress)
    if options.shard.source:  # --shard auto: which part, and from what
        progress(f"shard {options.shard} from {options.shard.source}")
    listings = gather(lister, args.repos, args.org, args.lock, options.filters, warn=progress)
    renderer = _Renderer(progress)
    try:
        result = mirror(listings, store, options, lister=lister, progress=renderer, uploads=uploads)
    finally:
        renderer.close()
    if args.json:
        out(json.dumps(result.to_dict(), indent=2))
    else:
        _table(result)
    return 1 if result.count("refused") else 0


def _options(args: argparse.Namespace) -> MirrorOptions:
    from ..mirror.pipeline import MirrorOptions
    from ..mirror.plan import Shard, VersionSelection

    return MirrorOptions(filters(args), VersionSelection.parse(args.versions, args.newest),
                         Shard.parse(args.shard, os.environ), args.replace_moved, args.prune,
                         args.dry_run, args.jobs, policy=policy(args),
                         remove_refused=args.remove_refused)


class _Renderer:
    """Mirror events through the command's progress (-q, -v, --progress-bar as every
    command has them): a line per repository and per wheel with bytes and rates, and on a
    terminal an overall bar of the planned items."""

    def __init__(self, progress: TerminalProgress) -> None:
        self.progress = progress
        self.start = time.monotonic()
        self.bytes = 0
        self.per_repo: dict[str, int] = {}
        self.overall: Task | None = None

    def __call__(self, event: Event) -> None:
        from ..mirror.progress import ItemDone, Listed, Message, Planned

        if isinstance(event, Listed):
            self.progress(f"{event.repo}: {event.releases} release(s), {event.variants} variant(s)")
        elif isinstance(event, Planned):
            self.progress(f"shard {event.shard}: {event.to_convert} to convert, "
                          f"{event.skipped} already there")
            if event.to_convert:
                self.overall = self.progress.task("mirroring", event.to_convert)
        elif isinstance(event, ItemDone):
            self.bytes += event.size
            self.per_repo[event.repo] = self.per_repo.get(event.repo, 0) + event.size
            elapsed = max(time.monotonic() - self.start, 1e-6)
            self.progress(f"[{event.done}/{event.total}] {event.repo} {event.version} {event.variant}: "
                          f"{event.wheel} ({readable_size(event.size)}; {event.repo} "
                          f"{readable_size(self.per_repo[event.repo])}; overall "
                          f"{readable_size(self.bytes)} at {readable_size(self.bytes / elapsed)}/s)")
            if self.overall is not None:
                self.overall.advance()
        elif isinstance(event, Message):
            self.progress(event.text)

    def close(self) -> None:
        if self.overall is not None:
            self.overall.finish()


def _table(result: MirrorResult) -> None:
    counts = result.to_dict()["counts"]
    rows = [r for r in result.rows if r.status != "skipped"]
    if rows:
        width = max(len(r.status) for r in rows)
        repo_width = max(len(r.repo) for r in rows)
        for row in rows:
            out(f"{row.status:<{width}}  {row.repo:<{repo_width}}  {row.version:<10} "
                  f"{row.variant:<40} {row.detail}".rstrip())
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n or s in ("added", "skipped"))
    # An index server lists the wheels itself: no pages to speak of.
    pages = f"; {result.pages_written} page(s) written" if result.writes_pages else ""
    out(f"{result.destination}{' (dry run)' if result.dry_run else ''}: {summary}{pages}")
