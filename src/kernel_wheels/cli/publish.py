"""``kernel-wheels publish``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import Commands, add_command

EPILOG = """\
examples:
  TWINE_USERNAME=ci TWINE_PASSWORD=... \\
    kernel-wheels publish wheels/ --repository-url http://pypi.internal:8080/
  kernel-wheels publish wheels/*.whl --repository-url https://devpi.internal/team/prod/
  kernel-wheels publish wheels/ --repository internal        # a section of ~/.pypirc
  kernel-wheels publish wheels/ --repository-url https://artifactory.internal/api/pypi/kernels \\
    --index-url https://artifactory.internal/api/pypi/kernels/simple/

Credentials, as twine reads them: -u/--username or TWINE_USERNAME, TWINE_PASSWORD,
the --repository section of ~/.pypirc (or --config-file), the URL's user part, then the
keyring (when the keyring package is installed), then a prompt on a terminal. They are
never printed, and go only to the upload URL's origin (scheme, host, port): a file the
index lists on another host is read without them. Files already on the index with the
same sha256 are skipped (when every file is there, nothing is uploaded and the
credentials are neither used nor checked); a different file under an existing name is
refused before anything is uploaded. The index's Simple API (to see existing files) is found for
pypiserver (/simple/) and devpi (/USER/INDEX/+simple/); give --index-url for other
servers.
--non-interactive never prompts; --dry-run checks and compares, uploading nothing;
--cert and --client-cert are twine's (a CA bundle; a PEM file with key and certificate).
`twine upload` and `uv publish` work with these wheels too (docs/distribution.md).
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    pb = add_command(
        commands, "publish", help="check wheels and upload the new ones to a package index",
        description="Upload wheels to an index server (pypiserver, devpi, Artifactory, "
                    "Nexus...) through the standard upload API, after checking each one and "
                    "comparing it with what the index already has.", epilog=EPILOG)
    pb.add_argument("inputs", nargs="+", type=Path, metavar="WHEELS_OR_DIRS",
                    help="wheel files, or folders whose *.whl files are published")
    pb.add_argument("--repository-url", help="upload URL (default: TWINE_REPOSITORY_URL)")
    pb.add_argument("-r", "--repository", metavar="NAME",
                    help="a section of ~/.pypirc naming the upload URL and credentials")
    pb.add_argument("--config-file", type=Path, help="the .pypirc to read (default: ~/.pypirc)")
    pb.add_argument("-u", "--username", help="user name (default: TWINE_USERNAME)")
    pb.add_argument("--index-url", help="the index's Simple API URL, when it cannot be "
                                        "derived from the upload URL")
    pb.add_argument("--no-keyring", action="store_true", help="do not ask the keyring")
    pb.add_argument("--non-interactive", action="store_true",
                    help="never prompt for a user name or password (twine's option)")
    pb.add_argument("--dry-run", action="store_true",
                    help="check and compare with the index, say what would be uploaded, "
                         "upload nothing")
    pb.add_argument("--cert", metavar="PATH", help="CA bundle to verify the index with")
    pb.add_argument("--client-cert", metavar="PATH",
                    help="client certificate: one PEM file with the key and certificate")
    pb.add_argument("--timeout", type=float, metavar="SECONDS",
                    help="connect timeout, and the window in which each transfer must move "
                         "64 KiB/s (default: $KERNEL_WHEELS_TIMEOUT or 60)")
    pb.add_argument("--json", action="store_true", help="print a JSON result on stdout")
    return pb


def run(args: argparse.Namespace) -> int:
    from ..remote.credentials import resolve_repository
    from ..remote.publish import publish
    from ..remote.transport import Tls, index_timeout

    timeout = index_timeout(args.timeout)
    tls = Tls(args.cert, args.client_cert)
    tls.context()  # a bad certificate file is a usage error before any work
    repository = resolve_repository(repository_url=args.repository_url,
                                    repository=args.repository, username=args.username,
                                    config_file=args.config_file,
                                    use_keyring=not args.no_keyring,
                                    interactive=False if args.non_interactive else None)
    outcomes = publish(args.inputs, repository, index_url=args.index_url, progress=args.progress,
                       timeout=timeout, dry_run=args.dry_run, tls=tls)
    uploaded = sum(o.status == "uploaded" for o in outcomes)
    would = sum(o.status == "would upload" for o in outcomes)
    there = len(outcomes) - uploaded - would
    verb = f"{would} would be uploaded (dry run)" if args.dry_run else f"{uploaded} uploaded"
    args.progress(f"done: {verb}, {there} already there, to {repository.display}")
    if outcomes and there == len(outcomes):
        # The upload API has no way to test a login without uploading: say so, rather
        # than let a wrong secret pass for a checked one (docs/distribution.md).
        args.progress("nothing to upload: the credentials were not used, nor checked")
    if args.json:
        print(json.dumps({"repository": repository.display,
                          "wheels": [o.to_dict() for o in outcomes]}, indent=2))
    else:
        for outcome in outcomes:
            print(f"{outcome.status}: {outcome.filename}")
    return 0
