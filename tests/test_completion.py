"""`kernel-wheels completion`: the bash, zsh and fish scripts complete from the parser
(argcomplete), tried in a real bash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.helpers import run_cli


def test_completion_scripts_complete_from_the_parser() -> None:
    bin_dir = str(Path(sys.executable).parent)
    script = """
eval "$(kernel-wheels completion bash)"
complete_for() { COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$1 "
  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); [[ "$1" == *" " ]] || COMP_CWORD=$(( COMP_CWORD ))
  _python_argcomplete kernel-wheels; echo "${COMPREPLY[*]}"; }
complete_for "kernel-wheels ins"
complete_for "kernel-wheels install --extra"
complete_for "kernel-wheels publish --non"
"""
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    assert [line.strip() for line in proc.stdout.splitlines()] == [
        "install", "--extra-index-url", "--non-interactive"], proc.stdout
    for shell, marker in (("zsh", "#compdef kernel-wheels"), ("fish", "complete --command kernel-wheels")):
        text = run_cli("completion", shell).stdout
        assert marker in text, (shell, text[:200])
    bad = run_cli("completion", "tcsh", check=False)
    assert bad.returncode == 2 and "invalid choice: 'tcsh'" in bad.stderr
