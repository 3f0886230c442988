"""The sample kernel's wheel (img2gray, CPU): ``kernel-wheels build`` of
``sample-kernel/`` with this venv's torch, then ``to-wheel`` of the build (checks on).
What a user of the project converts first; the check and install rows start from it.
Built once under .work/."""

from __future__ import annotations

import shutil
import subprocess

from .config import KERNEL_WHEELS, KERNELS, SAMPLE, SAMPLE_VERSION
from .measure import base_env

BUILD = KERNELS / "sample-build"
WHEELS = KERNELS / "sample-wheels"


def sample_wheel() -> tuple[str, int]:
    """(path of the sample's CPU wheel, its size in bytes); made when missing."""
    done = WHEELS.with_name("sample-wheels.done")
    if not done.exists():
        for folder in (BUILD, WHEELS):
            shutil.rmtree(folder, ignore_errors=True)
        for argv in (["build", str(SAMPLE), "-o", str(BUILD)],
                     ["to-wheel", str(BUILD), SAMPLE_VERSION, "-o", str(WHEELS)]):
            proc = subprocess.run([str(KERNEL_WHEELS), *argv], capture_output=True, text=True,
                                  env=base_env())
            if proc.returncode != 0:
                raise RuntimeError(f"kernel-wheels {' '.join(argv)} exited {proc.returncode}:\n"
                                   f"{proc.stderr[-1500:]}")
        done.touch()
    wheels = sorted(WHEELS.glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected the sample's one CPU wheel in {WHEELS}, found {len(wheels)}")
    return str(wheels[0]), wheels[0].stat().st_size
