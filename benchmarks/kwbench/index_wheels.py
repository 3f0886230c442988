"""Many small, valid kernel wheels for the ``index`` rows, made by kernel-wheels itself.

A tiny kernel (20 variants, each a real ~16 KB abi3 extension) is converted through the
Python API with ``check=False`` (speed: the wheels are the same as checked ones) under
many distribution names (prefixed forms of the kernel's own, as the names rule asks) and
versions: projects x versions x 20 variants. One wheel of each set is checked, so that an
index that refuses failing wheels accepts them all.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .config import KERNELS
from .kernel import variant_names, write_variant

VARIANTS = 20


def _tiny_kernel() -> Path:
    folder = KERNELS / "index-kernel"
    done = folder.with_name("index-kernel.done")
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        for seed, name in enumerate(variant_names(VARIANTS)):
            write_variant(folder / "build" / name, name, 0, seed)
        done.touch()
    return folder


def _convert(kernel: Path, out: Path, dist_name: str, version: str) -> list[Path]:
    from kernel_wheels.convert.pipeline import ConvertOptions, to_wheels
    from kernel_wheels.kernel.versions import parse_request
    from kernel_wheels.sources import open_source

    result = to_wheels(open_source(str(kernel)), parse_request(version),
                       ConvertOptions(output_dir=out, dist_name=dist_name, check=False),
                       progress=lambda _line: None)
    return [w.path for w in result.wheels]


def _assert_valid(wheel: Path) -> None:
    from kernel_wheels.checks import judge_wheel as check_wheel

    report = check_wheel(wheel)
    if not report.passed:
        raise RuntimeError(f"generated wheel {wheel.name} fails check: {report}")


def generate(count: int) -> tuple[Path, Path]:
    """(folder of about ``count`` wheels, folder holding one more wheel: a new release of
    one of the projects). Built once under .work/index-wheels/."""
    versions = 10 if count >= 2000 else 5
    projects = max(1, count // (VARIANTS * versions))
    base = KERNELS / "index-wheels" / str(count)
    wheels, extra = base / "wheels", base / "extra"
    done = base / "done"
    if done.exists():
        return wheels, extra
    shutil.rmtree(base, ignore_errors=True)
    kernel = _tiny_kernel()
    for project in range(projects):
        for minor in range(versions):
            written = _convert(kernel, wheels, f"kwbench{project:03d}-index-kernel", f"1.{minor}.0")
            if project == minor == 0:
                _assert_valid(written[0])
    newer = _convert(kernel, base / "extra-all", "kwbench000-index-kernel", "2.0.0")
    extra.mkdir(parents=True)
    shutil.move(str(newer[0]), extra / newer[0].name)
    _assert_valid(extra / newer[0].name)
    shutil.rmtree(base / "extra-all")
    done.touch()
    return wheels, extra
