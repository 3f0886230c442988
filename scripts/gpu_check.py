#!/usr/bin/env python3
"""Exactness of a CUDA img2gray against the float32 CPU reference, on a GPU.

As a script: build the sample kernel's CUDA and CPU variants with this machine's torch
and nvcc (`kernel-wheels build`), run every case below, print a table and a JSON
summary (also written to OUT/gpu_check.json). Exit 0 only if every byte matches.

    PYTHONPATH=src python3 scripts/gpu_check.py --out /tmp/gpu

As a module (the wheel/index/install chain reuses it on an installed `img2gray`):

    from gpu_check import check_errors, check_exactness, errors_ok, format_table
    rows = check_exactness(img2gray)          # any module with img2gray() and ops.img2gray
    print(format_table(rows)); assert all(r["ok"] for r in rows)
    assert errors_ok(check_errors(img2gray))

The cases: random images of odd and even sizes (0x7, 1x1 up to 8191x8193) and one image that
holds every RGB triple once (4096x4096), each as a fresh tensor and as views at storage
offsets of larger buffers (every byte offset 1..16, 48, a row slice), through the
Python wrapper and through the op with outputs poisoned two ways (0x00 and 0xFF: a byte
the kernel does not write cannot match the reference both times) and with an output at
an odd address (its neighbours must stay untouched). Needs only torch (with CUDA) and,
as a script, this repository.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent

# (height, width): tiny and odd sizes for the scalar tail, exact multiples of 16 pixels,
# the benchmark's sizes and one large odd size.
SHAPES: list[tuple[int, int]] = [
    (0, 7), (1, 1), (1, 15), (1, 16), (1, 17), (2, 8), (3, 5), (17, 31), (255, 257),
    (1080, 1920), (1081, 1921), (2160, 3840), (4320, 7680), (8191, 8193),
]
ALL_TRIPLES = (4096, 4096)  # 2^24 pixels: every (R, G, B) once
# Where the image's bytes start in their buffer: a fresh tensor; the rows [1:] of an
# (H + 1) x W x 3 image (storage offset 3W); every byte offset 1..16 (offset % 16 is
# how far the CUDA kernel's shifted path moves the loaded bytes), and 48.
LAYOUTS = ["fresh", "rows[1:]", *(f"offset+{k}" for k in range(1, 17)), "offset+48"]
# Fewer for images over 5 megapixels, to keep the CPU reference's time down: every
# whole-word shift (0..3 words) and every byte shift (0..3 bytes) still occurs.
LARGE_LAYOUTS = ["fresh", "rows[1:]", "offset+1", "offset+6", "offset+11", "offset+16"]
LARGE = 5_000_000


def reference(image: torch.Tensor) -> torch.Tensor:
    """float32 reference on the CPU: products and sums rounded separately, truncated."""
    f = image.cpu().float()
    return ((0.21 * f[..., 0] + 0.72 * f[..., 1]) + 0.07 * f[..., 2]).to(torch.uint8)


def all_triples(device: str | torch.device) -> torch.Tensor:
    """A 4096x4096x3 image holding every (R, G, B) triple exactly once."""
    i = torch.arange(1 << 24, device=device, dtype=torch.int32)
    rgb = torch.stack([(i >> 16) & 255, (i >> 8) & 255, i & 255], dim=-1).to(torch.uint8)
    return rgb.view(*ALL_TRIPLES, 3)


def make_image(shape: tuple[int, int], layout: str, content: str, generator: torch.Generator,
               device: str | torch.device) -> torch.Tensor:
    height, width = shape
    n = height * width * 3

    def fill(count: int) -> torch.Tensor:
        return torch.randint(0, 256, (count,), dtype=torch.uint8, device=device,
                             generator=generator)

    if layout == "rows[1:]":
        image = fill(n + width * 3).view(height + 1, width, 3)[1:]
    elif layout == "fresh":
        image = fill(n).view(height, width, 3)
    else:
        offset = int(layout.removeprefix("offset+"))
        image = fill(n + offset + 5)[offset:offset + n].view(height, width, 3)
    if content == "all-triples":
        image.copy_(all_triples(device))
    assert image.is_contiguous()
    return image


def _mismatches(gray: torch.Tensor, expected: torch.Tensor) -> int:
    return int((gray != expected).sum())


def _path(image: torch.Tensor, output: torch.Tensor) -> str:
    """The CUDA kernel path these pointers take (see sample-kernel/csrc/img2gray.cu)."""
    if output.data_ptr() % 16:
        return "scalar"
    return "aligned" if image.data_ptr() % 16 == 0 else "shifted"


def check_exactness(img2gray: ModuleType, cpu_img2gray: ModuleType | None = None, *,
                    device: str = "cuda", seed: int = 0,
                    shapes: list[tuple[int, int]] | None = None,
                    every_triple: bool = True,
                    progress: Any = None) -> list[dict[str, Any]]:
    """Run every case on ``img2gray`` (a module with ``img2gray(image)`` and
    ``ops.img2gray(image, out)``) and compare with the CPU reference byte for byte.
    With ``cpu_img2gray`` (the CPU variant), check that it equals the reference too.
    ``shapes`` replaces the random images' sizes; ``every_triple=False`` leaves out the
    2^24-pixel image of every RGB triple; ``progress`` (e.g. ``print``) gets a line per
    image. Returns one row per (image, layout);
    ``row["ok"]`` is true when nothing differs."""
    generator = torch.Generator(device=device).manual_seed(seed)
    cases = [(shape, "random", LARGE_LAYOUTS if shape[0] * shape[1] > LARGE else LAYOUTS)
             for shape in (shapes or SHAPES)]
    if every_triple:
        cases.append((ALL_TRIPLES, "all-triples", LARGE_LAYOUTS))
    rows = []
    for shape, content, layouts in cases:
        for layout in layouts:
            image = make_image(shape, layout, content, generator, device)
            expected = reference(image).to(device)
            row: dict[str, Any] = {"shape": f"{shape[0]}x{shape[1]}", "content": content,
                                   "layout": layout, "storage_offset": image.storage_offset(),
                                   "pixels": shape[0] * shape[1]}
            gray = img2gray.img2gray(image)
            row["path"] = _path(image, gray)
            row["wrapper"] = _mismatches(gray, expected)
            for poison in (0x00, 0xFF):
                out = torch.full(shape, poison, dtype=torch.uint8, device=device)
                img2gray.ops.img2gray(image, out)
                row[f"poison_{poison:02x}"] = _mismatches(out, expected)
            # An output at an odd address: the scalar path, whatever the input.
            buffer = torch.full((shape[0] * shape[1] + 2,), 0xA5, dtype=torch.uint8, device=device)
            out = buffer[1:-1].view(shape)
            img2gray.ops.img2gray(image, out)
            row["odd_output"] = _mismatches(out, expected)
            row["guard_bytes_intact"] = bool(buffer[0] == 0xA5 and buffer[-1] == 0xA5)
            if cpu_img2gray is not None and layout in ("fresh", "offset+1"):
                row["cpu_kernel"] = _mismatches(cpu_img2gray.img2gray(image.cpu()),
                                                expected.cpu())
            counts = [row["wrapper"], row["poison_00"], row["poison_ff"], row["odd_output"],
                      row.get("cpu_kernel", 0)]
            row["ok"] = sum(counts) == 0 and row["guard_bytes_intact"]
            rows.append(row)
        if progress:
            done = [r for r in rows if r["shape"] == f"{shape[0]}x{shape[1]}"]
            progress(f"checked {shape[0]}x{shape[1]} {content}: {len(done)} layouts, "
                     f"{'ok' if all(r['ok'] for r in done) else 'MISMATCHES'}")
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return rows


def check_errors(img2gray: ModuleType, device: str = "cuda") -> dict[str, str]:
    """The clear errors users get for bad inputs (first line of each message)."""
    def first_line(call) -> str:  # type: ignore[no-untyped-def]
        try:
            call()
        except (RuntimeError, TypeError, ValueError) as exc:
            return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        return "no error"

    image = torch.zeros(8, 8, 3, dtype=torch.uint8, device=device)
    strided = torch.zeros(8, 16, 3, dtype=torch.uint8, device=device)[:, ::2]
    return {
        "mixed_devices": first_line(lambda: img2gray.ops.img2gray(
            image, torch.empty(8, 8, dtype=torch.uint8))),
        "float_input": first_line(lambda: img2gray.img2gray(image.float())),
        "non_contiguous_wrapper": first_line(lambda: img2gray.img2gray(strided)),
        "non_contiguous_op": first_line(lambda: img2gray.ops.img2gray(
            strided, torch.empty(8, 8, dtype=torch.uint8, device=device))),
        "wrong_output_shape": first_line(lambda: img2gray.ops.img2gray(
            image, torch.empty(8, 9, dtype=torch.uint8, device=device))),
        "wrong_input_shape_op": first_line(lambda: img2gray.ops.img2gray(
            torch.zeros(8, 8, 4, dtype=torch.uint8, device=device),
            torch.empty(8, 8, dtype=torch.uint8, device=device))),
    }


EXPECTED_ERRORS = {
    "mixed_devices": "same device", "float_input": "must be uint8",
    "non_contiguous_wrapper": "contiguous", "non_contiguous_op": "input must be contiguous",
    "wrong_output_shape": "output must have shape (H, W) = (8, 8), got (8, 9)",
    "wrong_input_shape_op": "input must have shape (H, W, 3), got (8, 8, 4)",
}


def errors_ok(errors: dict[str, str]) -> bool:
    return all(EXPECTED_ERRORS[key] in errors[key] for key in EXPECTED_ERRORS)


def format_table(rows: list[dict[str, Any]]) -> str:
    """One line per image: how many layouts took each kernel path, and the mismatching
    bytes summed over the layouts for each output mode (0 everywhere is the goal)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["shape"], r["content"]), []).append(r)
    header = (f"{'image':<11} {'content':<11} {'layouts':>7} {'aligned':>7} {'shifted':>7} "
              f"{'wrapper':>7} {'out=00':>7} {'out=ff':>7} {'odd out':>7} {'cpu':>5}  ok")
    lines = [header, "-" * len(header)]
    for (shape, content), group in groups.items():
        paths = [r["path"] for r in group]
        cpu = [r["cpu_kernel"] for r in group if "cpu_kernel" in r]
        sums = [sum(r[key] for r in group) for key in ("wrapper", "poison_00", "poison_ff",
                                                       "odd_output")]
        lines.append(f"{shape:<11} {content:<11} {len(group):>7} {paths.count('aligned'):>7} "
                     f"{paths.count('shifted'):>7} {sums[0]:>7} {sums[1]:>7} {sums[2]:>7} "
                     f"{sums[3]:>7} {sum(cpu) if cpu else '-':>5}  "
                     f"{'yes' if all(r['ok'] for r in group) else 'NO'}")
    return "\n".join(lines)


def load(variant: Path, name: str) -> ModuleType:
    """Import a built variant folder as a package named ``name``."""
    spec = importlib.util.spec_from_file_location(
        name, variant / "__init__.py", submodule_search_locations=[str(variant)])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build(source: Path, out: Path, *backends: str) -> dict[str, Path]:
    """`kernel-wheels build` (this repository's, with this Python's torch and nvcc) of
    ``source`` into ``out``; returns {backend: variant folder}."""
    # This repository's kernel_wheels, unless PYTHONPATH names another one first.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [*filter(None, [os.environ.get("PYTHONPATH")]), str(ROOT / "src")])}
    command = [sys.executable, "-m", "kernel_wheels", "build", str(source), "-o", str(out)]
    for backend in backends:
        command += ["--backend", backend]
    subprocess.run(command, check=True, env=env)
    variants = {}
    for variant in sorted((out / "build").iterdir()):
        backend = "cpu" if "-cpu-" in variant.name else "cuda" if "-cu" in variant.name else None
        if backend and (not backends or backend in backends):
            variants[backend] = variant
    return variants


def symbol_versions(build: Path) -> dict[str, Any]:
    """Per extension: the newest version it imports of each library's symbols, and any
    import above manylinux_2_28 (the symbol table, not the wheel's tag)."""
    from kernel_wheels.building.config import version_tuple
    from kernel_wheels.building.extension_check import imports_of
    from kernel_wheels.building.symbol_versions import over_limit

    found: dict[str, Any] = {}
    for so in sorted(build.glob("*/*.so")):
        imports = imports_of(so)
        newest: dict[str, str] = {}
        for _, version in imports:
            prefix, _, number = version.rpartition("_")
            if re.fullmatch(r"\d+(\.\d+)*", number) and (
                    version_tuple(number) > version_tuple(newest.get(prefix, "0"))):
                newest[prefix] = number
        found[f"{so.parent.name}/{so.name}"] = {
            "newest": {k: f"{k}_{v}" for k, v in sorted(newest.items())},
            "above_manylinux_2_28": [f"{s.symbol}@{s.version}" for s in over_limit(imports)]}
    return found


def build_sample(out: Path) -> dict[str, Any]:
    """Build the sample kernel's CPU and CUDA variants; return their folders and the time."""
    started = time.monotonic()
    if out.exists():
        shutil.rmtree(out)  # never test a stale build
    variants = build(ROOT / "sample-kernel", out)
    return {"variants": variants, "build_seconds": round(time.monotonic() - started, 1)}


def machine() -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0),
            "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
            "multiprocessors": props.multi_processor_count,
            "memory_GiB": round(props.total_memory / 2**30, 1),
            "l2_MB": round(getattr(props, "L2_cache_size", 0) / 1e6, 1)}


def main() -> int:
    faulthandler.enable()  # a crash in native code still shows where Python was
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-check-out"))
    args = parser.parse_args()
    assert torch.cuda.is_available(), "no GPU visible to torch"
    summary: dict[str, Any] = machine()
    build = build_sample(args.out / "build-output")
    summary["build_seconds"] = build["build_seconds"]
    gpu_kernel = load(build["variants"]["cuda"], "img2gray_cuda_variant")
    cpu_kernel = load(build["variants"]["cpu"], "img2gray_cpu_variant")
    started = time.monotonic()
    rows = check_exactness(gpu_kernel, cpu_kernel, progress=print)
    summary["check_seconds"] = round(time.monotonic() - started, 1)
    summary["results"] = rows
    summary["errors"] = check_errors(gpu_kernel)
    summary["ok"] = all(r["ok"] for r in rows) and errors_ok(summary["errors"])
    text = json.dumps(summary, indent=2)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(text + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "results"}, indent=2))
    print(format_table(rows))
    print(f"{len(rows)} cases, {sum(r['pixels'] for r in rows)} pixels, 4 output modes each: "
          f"{'all exact' if summary['ok'] else 'MISMATCHES'}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
