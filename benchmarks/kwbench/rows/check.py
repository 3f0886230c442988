"""``kernel-wheels check`` against ``auditwheel show`` alone (its peer: the tool every
manylinux wheel meets), on the same file, interleaved, for three wheels:

- the sample kernel's wheel (img2gray, CPU, about 32 KB): what check costs where start-up
  and imports are most of it (issue #42: at most 0.6x);
- a CUDA variant of the benchmark kernel whose extension carries ``check_gpu_mb`` MB
  (a wheel of about 50 MB at full sizes) and real device code (issue #42: at most 1.0x);
- a CPU variant holding a torch library as a shared library next to the small
  extension: ``libtorch_cpu.so`` (434 MB, 75k dynamic and 530k static symbols) at full
  sizes, so that check has a real large ELF to analyse (issue #10: at most 1.2x).

The last two are written once by ``to-wheel --no-check`` from a local folder (so they
have the provenance record and metadata.json digests that check verifies). auditwheel
only analyses the binaries; check also verifies RECORD, metadata, digests, structure, the
limited API and the GPU code.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..bench import Bench
from ..config import AUDITWHEEL, KERNEL_WHEELS, KERNELS, RELEASE, torch_lib
from ..kernel import MB, MODULE, write_variant
from ..measure import Job, base_env, run_interleaved
from ..report import Row, Target
from ..sample import sample_wheel

CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
CUDA_VARIANT = "torch213-cxx11-cu128-x86_64-linux"


def _converted(stem: str, variant: str, payload_bytes: int,
               extra_libraries: dict[str, Path] | None = None) -> Path:
    """The wheel of one variant (built once): ``to-wheel --no-check`` of a local folder."""
    kernel = KERNELS / "check-kernel" / stem
    out = KERNELS / "check-wheel" / stem
    done = kernel.with_name(stem + ".done")
    if not done.exists() or not list(out.glob("*.whl")):
        shutil.rmtree(kernel, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        write_variant(kernel / "build" / variant, variant, payload_bytes, 0, extra_libraries)
        subprocess.run([str(KERNEL_WHEELS), "to-wheel", str(kernel), RELEASE, "--no-check", "-o", str(out)],
                       check=True, capture_output=True, env=base_env())
        done.touch()
    return next(out.glob("*.whl"))


def _library_wheel(elf_name: str) -> tuple[Path, int]:
    """The CPU variant holding torch's ``elf_name``, and the library's size."""
    elf = torch_lib() / elf_name
    stem = elf_name.split(".")[0]
    wheel = _converted(stem, CPU_VARIANT, 0, {f"lib{MODULE}_{stem.removeprefix('lib')}.so": elf})
    return wheel, elf.stat().st_size


def _compare(bench: Bench, key: str, title: str, wheel: str | Path, target: float,
             what: str) -> Row:
    # exit 1 (a check failed) is still a timing; the note says so
    ours = Job(f"check-{key}", [str(KERNEL_WHEELS), "check", str(wheel)], base_env(), accept=(0, 1))
    auditwheel = Job(f"auditwheel-show-{key}", [str(AUDITWHEEL), "show", str(wheel)], base_env())
    bench.progress(f"  {title}")
    run_interleaved([ours, auditwheel], bench.sizes.runs, bench.progress)
    return Row(
        f"check/{key}", title,
        f"kernel-wheels check (every check) vs auditwheel show alone, on the same wheel: {what}",
        "s", ours.median_s, auditwheel.median_s, Target("ratio_max", target),
        note="" if set(ours.returncodes) == {0} else
        f"kernel-wheels check exit statuses {ours.returncodes}: it found the wheel failing",
        samples={"ours": [s.seconds for s in ours.samples],
                 "baseline": [s.seconds for s in auditwheel.samples]})


def run(bench: Bench) -> list[Row]:
    bench.progress("  check: the sample kernel's wheel (built once)")
    sample, sample_size = sample_wheel()
    gpu = _converted(f"cuda-{bench.sizes.check_gpu_mb}mb", CUDA_VARIANT, bench.sizes.check_gpu_mb * MB)
    gpu_size = gpu.stat().st_size
    library, elf_size = _library_wheel(bench.sizes.check_elf)
    return [
        _compare(bench, "sample", f"check, the sample wheel ({sample_size / 1000:.0f} KB)", sample, 0.6,
                 "the sample kernel's CPU wheel (img2gray), start-up and imports included"),
        _compare(bench, "cuda", f"check, CUDA wheel of {gpu_size / 1e6:.0f} MB", gpu, 1.0,
                 f"a CUDA variant whose extension holds {bench.sizes.check_gpu_mb} MB of real "
                 "library bytes and nvcc's device code for the capabilities it claims"),
        _compare(bench, "library", f"check, wheel with {bench.sizes.check_elf} ({elf_size / 1e6:.0f} MB)",
                 library, 1.2, f"a CPU variant holding torch's {bench.sizes.check_elf} as a library"),
    ]
