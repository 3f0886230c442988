"""kw-hub, a Python-only kernel (kernel-builder's torch-noarch) whose build.toml names its Hub
repository (acme/kw-hub), built for real by `kernel-wheels build`."""

from __future__ import annotations

from pathlib import Path

from .helpers import run_cli

HUB_KERNEL = """\
[general]
name = "kw-hub"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[general.hub]
repo-id = "acme/kw-hub"

[torch-noarch]
"""


def build_hub_kernel(root: Path, toml: str = HUB_KERNEL) -> Path:
    """A Python-only kernel (kernel-builder's torch-noarch) built by `build`: its
    torch-cpu variant fits any torch that runs on the CPU."""
    tree = root / "kw-hub"
    (tree / "torch-ext" / "kw_hub").mkdir(parents=True)
    (tree / "torch-ext" / "kw_hub" / "__init__.py").write_text("def answer():\n    return 42\n")
    (tree / "build.toml").write_text(toml)
    run_cli("build", tree, "-o", root / "out")
    return root / "out"
