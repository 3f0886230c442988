"""What several commands share: output helpers, the common options, and their values
as the typed options the API takes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # the command line stays light: each command imports what it runs
    from ..kernel.selection import VariantFilter
    from ..network import NetworkSettings
    from ..provenance import Policy

PROG = "kernel-wheels"
#: What ``register(commands)`` adds its sub-parser to.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_command(commands: Commands, name: str, *, help: str, description: str,
                epilog: str) -> argparse.ArgumentParser:
    """A command's sub-parser: its one-line help in ``kernel-wheels --help``, its
    description, and an epilog of examples kept as written."""
    return commands.add_parser(name, help=help, description=description,
                               formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)


def print_json_error(args: argparse.Namespace, kind: str, message: str, exit_code: int,
                     details: dict[str, object] | None = None) -> None:
    """With --json, a failure is a JSON object on stdout too, so scripts never parse
    an empty output; ``details`` (what the command found before it failed) go into the
    same document: one document per run, success or failure."""
    if getattr(args, "json", False):
        print(json.dumps({**(details or {}),
                          "error": {"type": kind, "message": message, "exit_code": exit_code}},
                         indent=2))


def print_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """A table on stdout: columns as wide as their widest cell, two spaces apart."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def writable_folder(path: Path, option: str) -> None:
    """``-o`` checked before any work: a folder (or one that can be made) that can be
    written to. One line, never the OS's raw error."""
    from ..errors import UsageError

    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == path else f"cannot be made: {existing} is a file"
        raise UsageError(f"{option} {path} {where}, not a folder; give a folder")
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only or not os.access(existing, os.W_OK | os.X_OK):
        why = "a read-only file system" if read_only else "permission denied"
        raise UsageError(f"{option} {path}: cannot write there ({why}); give a folder you "
                         "can write to")


def positive_int(text: str) -> int:
    """-j/--jobs: 1 or more (left out: one per CPU); 0 or less is a usage error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give 1 or more (leave it out for one per CPU)")
    return value


def add_output(parser: argparse.ArgumentParser) -> None:
    """-q/-v and --progress-bar, as pip has them, on every command."""
    group = parser.add_argument_group("output")
    group.add_argument("-q", "--quiet", action="count", default=0,
                       help="less output: -q warnings and errors only, -qq errors only")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="more output (details of each step)")
    group.add_argument("--progress-bar", choices=("auto", "on", "off"), default="auto",
                       help="progress bars on stderr: auto (on a terminal, the default), on, off")


def add_filters(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("variant selection")
    group.add_argument("--variant", action="append", default=[], metavar="PATTERN",
                       help="glob on variant names, e.g. 'torch27-*-cu128-*' (repeatable)")
    group.add_argument("--torch", action="append", default=[], metavar="X.Y",
                       help="only variants for this torch version (repeatable)")
    group.add_argument("--backend", action="append", default=[], metavar="NAME",
                       help="only this backend: cuda, rocm, cpu, ... or cu128 (repeatable)")
    group.add_argument("--arch", action="append", default=[], metavar="ARCH",
                       help="only this CPU architecture: x86_64, aarch64 (repeatable)")
    group.add_argument("--os", action="append", default=[], metavar="OS",
                       help="only this OS: linux, darwin, windows (repeatable)")


def add_source_options(parser: argparse.ArgumentParser, *, filters: bool = False,
                       policy: bool = False) -> None:
    """The options of a command that reads a kernel source, in the order --help lists
    them: the variant selection (``filters``), the Hub repository type, the network, the
    provenance policy (``policy``)."""
    if filters:
        add_filters(parser)
    add_source(parser)
    add_network(parser)
    if policy:
        add_policy(parser)


def filters(args: argparse.Namespace) -> VariantFilter:
    from ..kernel.selection import VariantFilter

    return VariantFilter(tuple(args.variant), tuple(args.torch), tuple(args.backend),
                         tuple(args.arch), tuple(args.os))


def add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo-type", choices=["kernel", "model"],
                        help="Hub repository type (default: try kernel, then model)")


def add_network(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("network")
    group.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="connect and read timeout of each Hub or git request "
                            "(default: $KERNEL_WHEELS_TIMEOUT or 30)")
    group.add_argument("--retries", type=int, metavar="N",
                       help="times a failed request is tried again, with backoff "
                            "(default: $KERNEL_WHEELS_RETRIES or 3)")


def network(args: argparse.Namespace) -> NetworkSettings:
    from ..network import NetworkSettings

    return NetworkSettings.from_environment(args.timeout, args.retries)


def add_policy(parser: argparse.ArgumentParser, *, publisher: bool = True) -> None:
    """The provenance policy options (docs/provenance.md), the same on every command
    that takes them. ``publisher``: the command can ask the Hub about publishers."""
    group = parser.add_argument_group("provenance policy (docs/provenance.md)")
    group.add_argument("--policy", type=Path, metavar="FILE",
                       help="a policy file (TOML); the options below tighten it")
    group.add_argument("--signer", action="append", default=[], metavar="ISSUER=IDENTITY",
                       help="also accept signatures by this OIDC issuer and certificate identity "
                            "(repeatable; kernels-community's build workflows are accepted by default)")
    group.add_argument("--trusted-root", type=Path, metavar="FILE",
                       help="a private Sigstore deployment's trusted root (default: Sigstore's "
                            "production root, as the sigstore library ships it; offline)")
    group.add_argument("--require-signature", action="store_true",
                       help="refuse variants without a metadata.json.sigstore bundle")
    group.add_argument("--require-clean", action="store_true",
                       help="refuse variants built from a dirty git tree")
    if publisher:
        group.add_argument("--require-trusted-publisher", action="store_true",
                           help="refuse kernels whose publisher the Hub does not mark as trusted "
                                "(as the kernels library does)")
        group.add_argument("--trust-remote-code", action="store_true",
                           help="accept untrusted publishers anyway (kernels' trust_remote_code=True)")


def policy(args: argparse.Namespace) -> Policy:
    from ..provenance.policy import PolicyOptions

    return PolicyOptions(args.policy, tuple(args.signer), args.trusted_root, args.require_signature,
                         getattr(args, "require_trusted_publisher", False),
                         getattr(args, "trust_remote_code", False), args.require_clean).resolve()
