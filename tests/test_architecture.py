"""The wings' import direction (docs/architecture.md), checked by import-linter's layers
contract in pyproject.toml: it holds for the package as it is, and it fails, naming the
import, when a copy of the package breaks it in each way the contract forbids. The floors
are read from that contract: it is the one list of them."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from support.helpers import ROOT

PACKAGE = ROOT / "src" / "kernel_wheels"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def contract_layers() -> list[list[str]]:
    """The layers of pyproject.toml's import contract, top floor first, each the modules
    it names (``a | b`` are independent siblings, ``a : b`` modules that may import each
    other: both are one floor)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "wings"]
    return [[name.strip() for name in re.split(r"[|:]", layer)] for layer in contract["layers"]]


def contract_modules() -> set[str]:
    return {name for layer in contract_layers() for name in layer}


def lint_imports(src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the project's contract, on the package found first in ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def copy_package(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / "kernel_wheels", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def test_the_package_keeps_the_contract(tmp_path: Path) -> None:
    proc = lint_imports(ROOT / "src", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout


def test_every_top_level_module_is_a_wing_or_on_the_floor() -> None:
    """What the tree shows: every wing (a folder) and every module lying flat beside them
    is on a floor of the contract, the flat ones on the bottom floor only, and the
    contract names nothing the tree lacks."""
    flat = {p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__", "_version")}
    wings = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    bottom = set(contract_layers()[-1])
    assert flat == bottom, "the flat modules are the bottom floor, and only they"
    assert set(wings) == contract_modules() - bottom
    for wing in wings:  # each wing says what it is
        doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()) >= 2, wing


@pytest.mark.parametrize(("module", "line", "forbidden"), [
    # A lower wing imports a higher one (inside a function, where it is easy to miss).
    ("kernel/variants.py", "def _upward():\n    from ..convert import pipeline  # noqa\n",
     "kernel_wheels.kernel.variants -> kernel_wheels.convert.pipeline"),
    ("wheel/plan.py", "from ..checks import judge_wheel  # noqa\n",
     "kernel_wheels.wheel.plan -> kernel_wheels.checks"),
    # A sibling on the same floor.
    ("sources/folder.py", "from ..building import config  # noqa\n",
     "kernel_wheels.sources.folder -> kernel_wheels.building.config"),
    ("site/build.py", "from ..convert import output  # noqa\n",
     "kernel_wheels.site.build -> kernel_wheels.convert.output"),
    ("install/core.py", "from ..site import pages  # noqa\n",
     "kernel_wheels.install.core -> kernel_wheels.site.pages"),
    # The index server client below install, the index format below both.
    ("remote/publish.py", "from ..install import core  # noqa\n",
     "kernel_wheels.remote.publish -> kernel_wheels.install.core"),
    ("index/targets.py", "from ..remote import transport  # noqa\n",
     "kernel_wheels.index.targets -> kernel_wheels.remote.transport"),
    # The ELF reader serves the checks and the builder: it uses neither.
    ("elf/reader.py", "from ..checks import report  # noqa\n",
     "kernel_wheels.elf.reader -> kernel_wheels.checks.report"),
    # The domain's values (GpuCode) lie below the ELF reader that returns them.
    ("kernel/gpu_archs.py", "from ..elf import fatbin  # noqa\n",
     "kernel_wheels.kernel.gpu_archs -> kernel_wheels.elf.fatbin"),
    # The floor reaching up.
    ("errors.py", "from .kernel import variants  # noqa\n",
     "kernel_wheels.errors -> kernel_wheels.kernel.variants"),
])
def test_an_import_against_the_direction_breaks_the_contract(tmp_path: Path, module: str, line: str,
                                                             forbidden: str) -> None:
    src = copy_package(tmp_path)
    target = src / "kernel_wheels" / module
    target.write_text(target.read_text() + "\n" + line)
    proc = lint_imports(src, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "0 kept, 1 broken" in proc.stdout
    assert forbidden in proc.stdout, proc.stdout


def test_a_new_module_without_a_floor_breaks_the_contract(tmp_path: Path) -> None:
    src = copy_package(tmp_path)
    (src / "kernel_wheels" / "reporting.py").write_text('"""A stage placed nowhere."""\n')
    proc = lint_imports(src, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "kernel_wheels.reporting" in proc.stdout + proc.stderr
