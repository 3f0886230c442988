"""``kernel-wheels check`` against ``auditwheel show`` alone, on a wheel holding a real
~430 MB ELF: torch's ``libtorch_cpu.so`` (full sizes), copied into a CPU variant as a
shared library next to the kernel's small extension module.

The wheel is written once by ``to-wheel --no-check`` from a local folder (so it has the
provenance record and metadata.json digest that check verifies), then both commands
read the same file. auditwheel only analyses the binaries; check also verifies RECORD,
metadata, digests, structure and the limited API.
"""

from __future__ import annotations

import shutil
import subprocess

from ..bench import Bench
from ..config import AUDITWHEEL, KERNEL_WHEELS, RELEASE, WORK, torch_lib
from ..kernel import MODULE, write_variant
from ..measure import Job, base_env, run_interleaved
from ..report import Row, Target

VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def _wheel_with(elf_name: str) -> tuple[str, int]:
    """Path of the wheel holding ``elf_name`` (built once) and the ELF's size."""
    elf = torch_lib() / elf_name
    stem = elf_name.split(".")[0]
    kernel = WORK / "check-kernel" / stem
    out = WORK / "check-wheel" / stem
    done = kernel.with_name(stem + ".done")
    if not done.exists() or not list(out.glob("*.whl")):
        shutil.rmtree(kernel, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        write_variant(kernel / "build" / VARIANT, VARIANT, 0, 0,
                      extra_libraries={f"lib{MODULE}_{stem.removeprefix('lib')}.so": elf})
        subprocess.run([str(KERNEL_WHEELS), "to-wheel", str(kernel), RELEASE, "--no-check", "-o", str(out)],
                       check=True, capture_output=True, env=base_env())
        done.touch()
    return str(next(out.glob("*.whl"))), elf.stat().st_size


def run(bench: Bench) -> list[Row]:
    elf_name = bench.sizes.check_elf
    wheel, elf_size = _wheel_with(elf_name)
    bench.progress(f"  check vs auditwheel show, wheel with {elf_name} ({elf_size / 1e6:.0f} MB)")
    # exit 1 (a check failed) is still a timing; the note says so
    ours = Job("check", [str(KERNEL_WHEELS), "check", wheel], base_env(), accept=(0, 1))
    auditwheel = Job("auditwheel-show", [str(AUDITWHEEL), "show", wheel], base_env())
    run_interleaved([ours, auditwheel], bench.sizes.runs, bench.progress)
    return [Row(
        "check", f"check, wheel with {elf_name} ({elf_size / 1e6:.0f} MB)",
        f"kernel-wheels check (every check) vs auditwheel show alone, on the same wheel holding "
        f"torch's {elf_name} as a library",
        "s", ours.median_s, auditwheel.median_s, Target("ratio_max", 1.2),
        note="" if set(ours.returncodes) == {0} else
        f"kernel-wheels check exit statuses {ours.returncodes}: it found the wheel failing",
        samples={"ours": [s.seconds for s in ours.samples],
                 "baseline": [s.seconds for s in auditwheel.samples]})]
