#!/usr/bin/env python3
"""Turn a `kernel-wheels build` output into a local "Hub kernel" git repository.

The repository looks like a kernel repo on the Hub: README.md (the card), build/<variant>/,
release tags v1.1.1 and v1.1.2, a later rebuild on the major branch v1 (also main).
Commit dates and authors are fixed, so the same build output gives the same commit SHAs.

    python scripts/make_kernel_repo.py OUT/build-output OUT/img2gray-repo --card sample-kernel/README.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

RELEASES = ("1.1.1", "1.1.2")
BASE_DATE = 1767225600  # 2026-01-01T00:00:00Z


def git(repo: Path, *args: str, step: int = 0) -> str:
    date = f"{BASE_DATE + step * 86400} +0000"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "kernel-wheels fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
        "GIT_COMMITTER_NAME": "kernel-wheels fixture",
        "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
        "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=env,
                          capture_output=True, text=True).stdout.strip()


def make_repo(build_output: Path, repo: Path, card: Path | None) -> None:
    if not (build_output / "build").is_dir():
        sys.exit(f"make_kernel_repo: {build_output} has no build/ folder")
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "commit.gpgsign", "false")
    shutil.copytree(build_output / "build", repo / "build",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
    card_text = card.read_text() if card else "# kernel\n"
    for step, version in enumerate(RELEASES):
        (repo / "README.md").write_text(f"{card_text.rstrip()}\n\nRelease {version}.\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"Release {version}", step=step)
        git(repo, "tag", "-a", f"v{version}", "-m", f"v{version}", step=step)
    # A later build of major version 1, on the major branch only (no tag).
    (repo / "README.md").write_text(f"{card_text.rstrip()}\n\nRebuild of major version 1.\n")
    git(repo, "commit", "-q", "-am", "Rebuild v1", step=len(RELEASES))
    git(repo, "branch", "v1")
    print(git(repo, "rev-parse", "HEAD"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_output", type=Path, help="folder holding build/ (kernel-wheels build -o)")
    parser.add_argument("repo", type=Path, help="repository to create (replaced if it exists)")
    parser.add_argument("--card", type=Path, help="README.md to use as the kernel card")
    args = parser.parse_args()
    make_repo(args.build_output, args.repo, args.card)


if __name__ == "__main__":
    main()
