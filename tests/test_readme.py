"""The README as a newcomer reads it: its install lines name refs that exist, it says what
each command needs and how pip and uv users do what they know, and its local-Hub recipe
runs as written."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.helpers import ROOT


def test_readme_says_how_to_install_what_each_command_needs_and_for_pip_users() -> None:
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "git clone" in install and "git+" in install and "[serve]" in install
    # No bare `pip install 'kernel-wheels[serve]'` that would ask an index for it.
    assert not re.search(r"pip install ['\"]?kernel-wheels\[serve\]['\"]?(?!\s*@)(\s|$)", readme)
    for needed in ("C++ compiler", "nvcc 13", "root", "7 GB"):
        assert needed in readme, needed
    assert "## For pip and uv users" in readme
    table = readme.split("## For pip and uv users", 1)[1].split("\n## ", 1)[0]
    for habit in ("PIP_INDEX_URL", "--extra-index-url", "--find-links", "--pre", ".netrc", "twine upload",
                  "pip freeze"):
        assert habit in table, habit
    assert "minutes" in readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    # The README's first two commands set up a fresh machine: the demo, then the tests.
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in first_block.splitlines()]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"], commands
    conformance = (ROOT / "docs" / "cli-conformance.md").read_text()
    for flag in ("--index-url", "--extra-index-url", "--find-links", "--no-index", "--pre", "--cert",
                 "--client-cert", "--keyring-provider", "--non-interactive", "--dry-run", "PIP_INDEX_URL",
                 "UV_INDEX_URL", "-q", "-v", "--progress-bar"):
        assert f"`{flag}" in conformance, flag


def test_readme_local_hub_recipe_works_as_written(kernel_repo: Path, tmp_path: Path) -> None:
    """The README's olah recipe, run as a stranger would paste it (its port changed to a
    free one; the last line, a server that runs until stopped, left out)."""
    import signal as signals

    from support.helpers import free_port

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Trying the Hub commands without the Hub", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.replace("8090", str(free_port())).splitlines()
             if not line.startswith("kernel-wheels serve")]
    shutil.copytree(kernel_repo, tmp_path / "out" / "img2gray")  # what the demo leaves
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "HF_HOME": str(tmp_path / "hf"), "KERNEL_WHEELS_CACHE": str(tmp_path / "kw")}
    env.pop("HF_ENDPOINT", None)
    log = tmp_path / "recipe.log"
    with log.open("w") as out:  # a file: the background olah keeps its output open
        shell = subprocess.Popen(["bash", "-e", "-c", "\n".join(lines)], cwd=tmp_path, env=env,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        shell.wait(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signals.SIGTERM)  # the olah it started in the background
    output = log.read_text()
    assert shell.returncode == 0, output
    assert "1.1.2    release  v1.1.2" in output, output
    assert len(list((tmp_path / "wheels").glob("img2gray-1.1.2+*.whl"))) == 2, output


def test_readme_install_lines_name_only_refs_that_exist() -> None:
    """A release tag in an install line must exist; without tags, the lines use main or a
    commit, and the README says how releases are made."""
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    block = install.split("```bash\n", 1)[1].split("```", 1)[0]
    tags = set(subprocess.run(["git", "-C", str(ROOT), "tag"], capture_output=True, text=True,
                              check=True).stdout.split())
    refs = [line.split("git+<repository URL>@", 1)[1].split('"', 1)[0]
            for line in block.splitlines() if "git+<repository URL>@" in line]
    assert refs, block
    for ref in refs:
        assert ref in ("main", "<commit>") or ref in tags, f"@{ref} does not exist (tags: {tags})"
    assert "kernel_wheels-0.1.0" not in block  # no released wheel that was never made
    assert "docs/release.md" in install and "vX.Y.Z" in install
