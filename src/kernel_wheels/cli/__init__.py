"""The command line: parses arguments, calls the API, prints. No logic of its own.

Each command lives in its own module (``cli/<command>.py``) with ``register(commands)``
adding its sub-parser and ``run(args)`` doing the work; this module assembles them and
turns typed errors into one line and an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..errors import KernelWheelsError
from ..redaction import redact
from .common import PROG, add_output, print_json_error, stderr

# Command modules, in the order `kernel-wheels --help` lists them.
COMMANDS = ("to_wheel", "check", "variants", "versions", "build", "index", "yank", "publish", "install",
            "local_kernels", "serve", "completion", "mirror", "verify")


class _Parser(argparse.ArgumentParser):
    """argparse's parser; with --json on the command line, its own errors (a bad option
    value, a missing argument) are a JSON error object on stdout too."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        try:
            print_json_error(argparse.Namespace(json=_Parser.json_errors), "UsageError", message, 2)
        except BrokenPipeError:
            _pipe_closed()  # no reader for the JSON: the usage still goes to stderr
        super().error(message)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line. Given the ``argv`` it will parse, whose first word names a
    command, only that command's sub-parser is made: the other command modules (and what
    they import) stay unloaded, so a quick command such as ``check`` pays for itself only
    (issue #42). ``--help``, an unknown command and shell completion get every command."""
    parser = _Parser(
        prog=PROG,
        description="Turn prebuilt Hugging Face Hub kernels into validated, reproducible wheels.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'kernel-wheels COMMAND --help' for a command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _needed(argv):
        module = importlib.import_module(f".{name}", __name__)
        sub = module.register(commands)
        add_output(sub)
        sub.set_defaults(handler=module.run, parser=sub)
    return parser


def _needed(argv: Sequence[str] | None) -> Sequence[str]:
    """The command modules ``argv`` needs: its command's alone, or all of them."""
    if argv and "_ARGCOMPLETE" not in os.environ:
        module = argv[0].replace("-", "_")
        if module in COMMANDS and argv[0] == module.replace("_", "-"):
            return (module,)
    return COMMANDS


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """argparse's parse, except that an unknown option is reported with the usage of the
    command it was given to, not the top level's."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command_parser: argparse.ArgumentParser = getattr(args, "parser", parser)
        command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that cleanup runs as for Ctrl-C."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return code
    except BrokenPipeError:  # also from an error's JSON document or argparse's usage
        return _pipe_closed()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (cli/completion.py)
        import argcomplete

        argcomplete.autocomplete(parser)  # answers and exits
    _Parser.json_errors = "--json" in (sys.argv[1:] if argv is None else argv)
    args = _parse(parser, argv)
    from .progress import from_args

    args.progress = from_args(args)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.handler(args))
    except BrokenPipeError:
        raise  # to main: not an OSError of the command's
    except EOFError:
        # End of input (Ctrl-D) at a prompt: the question had no answer.
        stderr(f"{PROG}: error: no answer at the prompt (end of input)")
        print_json_error(args, "UsageError", "no answer at the prompt (end of input)", 2)
        return 2
    except KernelWheelsError as exc:
        # Masked here too (stderr masks again): the JSON document quotes the message.
        first, *rest = redact(exc.message, userinfo="***@").splitlines() or [""]
        stderr(f"{PROG}: error: {first}")
        for line in rest:  # compiler output after a build error
            stderr(f"  {line}")
        print_json_error(args, type(exc).__name__, first, exc.exit_code,
                         getattr(exc, "json_details", None))
        return exc.exit_code
    except OSError as exc:  # the file system said no: a full disk, a read-only folder...
        where = f": {exc.filename}" if exc.filename else ""
        message = redact(f"{exc.strerror or exc}{where}", userinfo="***@")
        stderr(f"{PROG}: error: {message}")
        print_json_error(args, "OSError", message, 1)
        return 1
    except (KeyboardInterrupt, Terminated) as exc:
        return _stopped(args, exc)
    except RuntimeError as exc:
        # Python wraps what interrupts the creation of a class (Ctrl-C or SIGTERM during
        # a lazy import) in a RuntimeError: still an interruption, not a crash.
        if isinstance(exc.__cause__, (KeyboardInterrupt, Terminated)):
            return _stopped(args, exc.__cause__)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _pipe_closed() -> int:
    """stdout's reader went away (``| head -1``): stop quietly, as a program killed by
    SIGPIPE would (exit 141), with nothing left for the interpreter to flush."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


def _stopped(args: argparse.Namespace, signal_: BaseException) -> int:
    """Ctrl-C (130) or SIGTERM (143): one line, and the JSON error object with --json."""
    if isinstance(signal_, KeyboardInterrupt):
        stderr(f"{PROG}: interrupted")
        print_json_error(args, "Interrupted", "interrupted", 130)
        return 130
    stderr(f"{PROG}: terminated")
    print_json_error(args, "Terminated", "terminated", 143)
    return 143
