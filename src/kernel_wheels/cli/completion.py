"""``kernel-wheels completion bash|zsh|fish``: the shell's completion script.

argcomplete completes from the parser itself (every command, option and choice, as
``--help`` lists them): the script calls ``kernel-wheels`` back with ``_ARGCOMPLETE``
set, and :func:`kernel_wheels.cli.main` answers from :func:`build_parser` before doing
anything else. Nothing is kept in step by hand.
"""

from __future__ import annotations

import argparse

from .common import PROG, Commands, add_command

SHELLS = ("bash", "zsh", "fish")

EPILOG = """\
examples:
  eval "$(kernel-wheels completion bash)"                      # in ~/.bashrc
  kernel-wheels completion zsh > "${fpath[1]}/_kernel-wheels"   # zsh (or eval in ~/.zshrc)
  kernel-wheels completion fish > ~/.config/fish/completions/kernel-wheels.fish
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    cp = add_command(
        commands, "completion", help="print the shell completion script (bash, zsh, fish)",
        description="Print a script that makes the shell complete kernel-wheels' commands "
                    "and options.", epilog=EPILOG)
    cp.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    return cp


def run(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    print(shellcode([PROG], shell=args.shell), end="")
    return 0
